"""Weights & Biases, offline: a run folder under <run>/wandb/ that `wandb sync` uploads later.

The mode is offline unless WANDB_MODE is set (online logging needs `wandb login`; teamrl's tests cover
offline only). A resumed run keeps the stopped run's id: W&B writes a second offline folder with that
id, and `wandb sync` uploads a run's folders in order of their start times into the one run.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Mapping

from teamrl.training.trackers.base import TrackerRun


class WandbTracker:
    """One W&B run; the config is its run config (nested, as in config.yaml)."""

    def __init__(self, run: TrackerRun) -> None:
        import wandb

        self.id = (run.previous or {}).get("id") or uuid.uuid4().hex[:12]
        self._run = wandb.init(
            project=run.project,
            name=run.name,
            id=self.id,
            dir=str(run.path),
            config=run.config,
            mode=None if os.environ.get("WANDB_MODE") else "offline",
            resume="allow" if run.resumed else "never",
            # create_new: another wandb run open in this process (a notebook's, a test's) is left alone.
            # console off: W&B would otherwise wrap sys.stdout and stderr for the whole run.
            reinit="create_new",
            settings=wandb.Settings(console="off"),
        )

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self._run.log(dict(metrics), step=step)

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "folder": str(Path(self._run.dir).parent), "mode": self._run.settings.mode}

    def close(self, failed: bool) -> None:
        self._run.finish(exit_code=1 if failed else 0)


def open_run(run: TrackerRun) -> WandbTracker:
    return WandbTracker(run)
