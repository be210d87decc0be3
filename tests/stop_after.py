"""A run that "dies" right after writing its step-N checkpoint: for the exact-resume tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from teamrl.training import loop as loop_module


class Stop(Exception):
    """Stands for the process dying right after a checkpoint."""


def stop_after_checkpoint(monkeypatch: pytest.MonkeyPatch, step: int, run: Callable[[], object]) -> None:
    """Call `run()` (one training run) with checkpoint writing patched to stop it after step `step`'s
    checkpoint is written; the patch is undone afterwards, so the caller can resume the run."""
    real_save = loop_module.save_training_state

    def save_then_stop(run_dir, state, *args, **kwargs):
        path = real_save(run_dir, state, *args, **kwargs)
        if state.step == step:
            raise Stop
        return path

    monkeypatch.setattr(loop_module, "save_training_state", save_then_stop)
    with pytest.raises(Stop):
        run()
    monkeypatch.setattr(loop_module, "save_training_state", real_save)
