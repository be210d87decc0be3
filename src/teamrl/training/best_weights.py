"""The weights of the best held-out evaluation so far, written as the `best` checkpoint.

Why not simply save `best` at every improvement: a run that cannot be resumed (checkpointing off) only
needs `best` at its end, and saving it at step 0 and at every improvement wrote the whole model each
time (540 MB at 135M with full fine-tuning) for a folder read only after the run. So:
- checkpointing on: `best` is written at once, as before, because a resumed run must find it on disk;
- checkpointing off: the trained tensors (what the optimizers hold: a LoRA adapter, or every weight of a
  fully fine-tuned policy) are copied in memory, and `best` is written once, at the end; when the best
  step is the last one, `best` is `final` by hard links, with no byte written twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from teamrl.policies.loading import Policy
from teamrl.training.checkpoint import link_checkpoint


class BestWeights:
    """Keeps the best step's weights (see the module doc) and writes them as `checkpoints/best`."""

    def __init__(self, run: Any, policies: dict[str, Policy], optimizers: Mapping[str, Any], on_disk: bool) -> None:
        """run: the RunDir; optimizers: policy name -> its PolicyOptimizer (their tensors are what training changes)."""
        self.run, self.policies, self.on_disk = run, policies, on_disk
        self.trained = {
            name: [p for group in state.optimizer.param_groups for p in group["params"]]
            for name, state in optimizers.items()
        }
        self.snapshot: dict[str, list[torch.Tensor]] | None = None
        self.step: int | None = None

    def record(self, step: int, last: bool = False) -> None:
        """The current weights are the best so far (at `step`); last: they are the run's final weights too."""
        self.step = step
        if last:  # `finish` makes best a link of final
            self.snapshot = None
            return
        if self.on_disk:
            self.run.save_checkpoint("best", self.policies)
            return
        with torch.no_grad():
            self.snapshot = {name: [p.detach().clone() for p in params] for name, params in self.trained.items()}

    def finish(self, final_step: int) -> Path:
        """Write `final` (the current weights) and `best`; returns the checkpoints folder."""
        final = self.run.save_checkpoint("final", self.policies)
        root = final.parent
        if self.step is None or self.step == final_step:
            link_checkpoint(root, "final", "best")
            return root
        if self.on_disk:
            return root  # written at its step, as it happened
        with torch.no_grad():  # the best weights in place for one save, then the final ones back
            current = {name: [p.detach().clone() for p in params] for name, params in self.trained.items()}
            assert self.snapshot is not None  # a best step not on disk was recorded in memory
            self._load(self.snapshot)
            try:
                self.run.save_checkpoint("best", self.policies)
            finally:
                self._load(current)
        return root

    def _load(self, tensors: dict[str, list[torch.Tensor]]) -> None:
        for name, params in self.trained.items():
            for param, value in zip(params, tensors[name], strict=True):
                param.copy_(value)
