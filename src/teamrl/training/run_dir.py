"""The run directory: resolved config, metrics.jsonl (+ TensorBoard when installed), checkpoints."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import yaml

from teamrl.config import RunConfig, config_to_dict
from teamrl.policies.loading import Policy


class RunDirectory:
    """Owns every file a run writes."""

    def __init__(self, config: RunConfig) -> None:
        name = config.run_name or (
            f"{config.task['name']}-{config.workflow.name}-{config.regime}-{config.algorithm.grouping}-s{config.seed}-"
            f"{time.strftime('%Y%m%d-%H%M%S')}")
        self.path = Path(config.output_dir) / name
        if (self.path / "metrics.jsonl").exists():
            raise FileExistsError(
                f"run directory {self.path} already holds a run; pick another run_name or delete it")
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "config.yaml").write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False))
        self._metrics = open(self.path / "metrics.jsonl", "a", buffering=1)
        self._tensorboard = _open_tensorboard(self.path / "tensorboard")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Append one JSON line; non-finite values are written as null, never dropped."""
        clean = {k: (v if isinstance(v, (int, float)) and math.isfinite(v) else None)
                 for k, v in metrics.items()}
        self._metrics.write(json.dumps({"step": step, **clean}) + "\n")
        if self._tensorboard is not None:
            for key, value in clean.items():
                if value is not None:
                    self._tensorboard.add_scalar(key, value, step)

    def write_json(self, name: str, payload: Any) -> Path:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(payload, indent=2, default=str))
        return target

    def save_checkpoint(self, tag: str, policies: dict[str, Policy]) -> Path:
        """One HF folder per policy under checkpoints/<tag>/<policy>/ (written, then renamed)."""
        final = self.path / "checkpoints" / tag
        partial = final.with_name(tag + ".partial")
        for name, policy in policies.items():
            policy.model.save_pretrained(partial / name)
            policy.tokenizer.save_pretrained(partial / name)
        if final.exists():
            import shutil
            shutil.rmtree(final)
        partial.rename(final)
        return final

    def close(self) -> None:
        self._metrics.close()
        if self._tensorboard is not None:
            self._tensorboard.close()


def _open_tensorboard(path: Path):
    """A SummaryWriter if tensorboard is installed; runs without it lose only the event files."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(path))
