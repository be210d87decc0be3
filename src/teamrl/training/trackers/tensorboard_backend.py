"""TensorBoard: event files under <run>/tensorboard, written by torch's SummaryWriter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from teamrl.training.trackers.base import TrackerRun


class TensorBoardTracker:
    """Scalars per step, and the config as a text panel."""

    def __init__(self, run: TrackerRun) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.folder = run.path / "tensorboard"
        # purge_step hides the events a stopped run logged at or after the step the resumed run logs again.
        self._writer = SummaryWriter(str(self.folder), purge_step=run.resume_from)
        if not run.resume_from:  # a new run, or one restarted from step 0 (its old events are purged)
            text = yaml.safe_dump(run.config, sort_keys=False)
            self._writer.add_text("config", "    " + text.replace("\n", "\n    "), 0)  # indented: shown as code

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            self._writer.add_scalar(key, value, step)

    def record(self) -> dict[str, Any]:
        return {"dir": str(self.folder)}

    def close(self, failed: bool) -> None:
        self._writer.close()


def open_run(run: TrackerRun) -> TensorBoardTracker:
    return TensorBoardTracker(run)
