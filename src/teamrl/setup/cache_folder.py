"""Publishing a cached model folder (a warm-up's checkpoint) so that no reader ever sees half of one.

The folder is written under a private temporary name beside its target and renamed into place when
complete. Two processes warming up the same recipe at once (two first runs of one config, a study's
jobs and a pre-warm) each write their own temporary folder; the second to finish finds the target
complete and drops its copy: a recipe's checkpoint is deterministic, so either copy is the same model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

COMPLETE_MARKER = "config.json"
"""A published model folder holds this file (every HF model folder has it)."""


def is_published(target: Path) -> bool:
    return (target / COMPLETE_MARKER).is_file()


def publish(target: Path, write: Callable[[Path], None], force: bool = False) -> Path:
    """Call `write(folder)` on a fresh temporary folder, then make it `target`; returns `target`.

    force: replace a published target (else one published meanwhile by another process is kept).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{target.name}.partial-", dir=target.parent))
    try:
        os.chmod(partial, 0o755)  # mkdtemp's folder is private; a cache folder is readable like any other
        write(partial)
        if force and target.exists():
            doomed = Path(tempfile.mkdtemp(prefix=f"{target.name}.deleting-", dir=target.parent))
            target.rename(doomed / target.name)
            shutil.rmtree(doomed)
        try:
            partial.rename(target)
        except OSError:
            if not is_published(target):
                raise  # not a finished twin: a half-written or foreign folder is in the way
            shutil.rmtree(partial)  # another process published the same recipe first
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return target
