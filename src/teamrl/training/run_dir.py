"""The run directory: resolved config, metrics.jsonl (+ the `report_to` trackers), checkpoints."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from teamrl.config import RunConfig, config_to_dict
from teamrl.policies.loading import Policy
from teamrl.training.checkpoint import CheckpointError, discard_after, write_checkpoint
from teamrl.training.trackers import open_trackers, resolve_report_to

if TYPE_CHECKING:
    from teamrl.training.resume import ResumePoint


class RunDirectory:
    """Owns every file a run writes."""

    def __init__(self, config: RunConfig, resume: "ResumePoint | None" = None) -> None:
        """A new run directory, or (resume) the existing one cut back to the checkpoint's step."""
        if resume is not None:
            self.path = resume.run_path
            self._roll_back(resume)
        else:
            name = config.run_name or (
                f"{config.task['name']}-{config.workflow.name}-{config.regime}-{config.algorithm.grouping}-s{config.seed}-"
                f"{time.strftime('%Y%m%d-%H%M%S')}")
            self.path = Path(config.output_dir) / name
            if (self.path / "metrics.jsonl").exists():
                raise FileExistsError(
                    f"run directory {self.path} already holds a run; pick another run_name, delete it, "
                    "or continue it with --resume (train.resume)")
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "config.yaml").write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False))
        self._metrics = open(self.path / "metrics.jsonl", "a", buffering=1)
        try:  # a resumed run logs again from the step after its checkpoint (from 0 without one)
            self._trackers = open_trackers(resolve_report_to(config.report_to), self.path, config.project,
                                           config_to_dict(config),
                                           None if resume is None else (resume.step + 1 if resume.loop else 0))
        except BaseException:
            self._metrics.close()
            raise

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def _roll_back(self, resume: "ResumePoint") -> None:
        """Drop what the stopped run wrote after the checkpoint: log lines, later checkpoints, summary.

        Every append-only `*.jsonl` log (metrics, alerts, ...) is cut to its length at the checkpoint.
        """
        for log in sorted(self.path.glob("*.jsonl")):
            keep = resume.log_bytes.get(log.name, 0)
            if log.stat().st_size < keep:
                raise CheckpointError(f"{log} is shorter ({log.stat().st_size} bytes) than when {resume.checkpoint} "
                                      f"was written ({keep}); the run directory was modified")
            with open(log, "a") as handle:
                handle.truncate(keep)
        discard_after(self.checkpoints, resume.step)
        (self.path / "summary.json").unlink(missing_ok=True)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Append one JSON line; non-finite values are written as null, never dropped."""
        clean = {k: (v if isinstance(v, (int, float)) and math.isfinite(v) else None)
                 for k, v in metrics.items()}
        self._metrics.write(json.dumps({"step": step, **clean}) + "\n")
        self._trackers.log(step, clean)

    def write_json(self, name: str, payload: Any) -> Path:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(payload, indent=2, default=str))
        return target

    def save_checkpoint(self, tag: str, policies: dict[str, Policy]) -> Path:
        """Weights only, one HF folder per policy under checkpoints/<tag>/<policy>/, written atomically."""
        return write_checkpoint(self.checkpoints, tag, policies)

    def sync_logs(self) -> dict[str, int]:
        """Flush every `*.jsonl` log of the run to disk; returns their lengths in bytes."""
        self._metrics.flush()
        sizes = {}
        for log in sorted(self.path.glob("*.jsonl")):
            with open(log, "rb") as handle:
                os.fsync(handle.fileno())
            sizes[log.name] = log.stat().st_size
        return sizes

    def close(self) -> None:
        """Close metrics.jsonl and the trackers; summary.json is the loop's last write, so a run
        closed without one stopped early and its tracker runs are marked failed."""
        self._metrics.close()
        self._trackers.close(failed=not (self.path / "summary.json").exists())
