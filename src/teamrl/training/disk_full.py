"""A disk that fills up while a run writes: recognised however it surfaces, and named as such.

A full disk reaches teamrl as OSError ENOSPC (or EDQUOT, a quota) from Python's own writes, as a
message inside another library's error (safetensors: "No space left on device"), or, from
torch.save to a path, as a RuntimeError without any errno ("unexpected pos ..."): teamrl's own
torch writes go through Python files (`checkpoint.save_torch`) so that the errno survives, and
that last form is taken for a full disk only when the disk has almost no space left.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_FULL_TEXTS = ("No space left on device", "Disk quota exceeded", "StorageFull")
_TORCH_WRITER_TEXTS = ("PytorchStreamWriter", "inline_container.cc")
_ALMOST_FULL = 64 << 20  # bytes: less than this left after a failed write means the write filled the disk


class DiskFullError(OSError):
    """Writing failed because the disk is full; `what` names what was being written.

    run_dir: the run directory whose run it stopped (None outside a run), for the resume command.
    """

    def __init__(self, what: str, run_dir: Path | None = None) -> None:
        super().__init__(errno.ENOSPC, f"disk full while writing {what}")
        self.what = what
        self.run_dir = run_dir


def is_disk_full(err: BaseException, where: Path | None = None) -> bool:
    """Whether `err` (or an error it was raised from) says the disk is full.

    where: a path on the disk being written; needed to recognise torch's errno-less writer error.
    """
    for link in _chain(err):
        if isinstance(link, OSError) and link.errno in _FULL_ERRNOS:
            return True
        text = str(link)
        if any(marker in text for marker in _FULL_TEXTS):
            return True
        torch_writer = any(marker in text for marker in _TORCH_WRITER_TEXTS)
        if torch_writer and where is not None and _free_bytes(where) < _ALMOST_FULL:
            return True
    return False


def what_was_written(err: BaseException, default: str) -> str:
    """What a disk-full `err` was writing: a DiskFullError's `what`, else the file an OSError names, else `default`."""
    for link in _chain(err):
        if isinstance(link, DiskFullError):
            return link.what
        if isinstance(link, OSError) and link.filename:
            return str(link.filename)
    return default


def disk_full_message(err: BaseException) -> str | None:
    """The CLI's line for a full disk (None when `err` is something else): what was being written,
    and how to go on (free space, then resume the run, or run the command again)."""
    if not is_disk_full(err):
        return None
    what = what_was_written(err, "a file")
    run_dir = err.run_dir if isinstance(err, DiskFullError) else None
    if run_dir is None or not run_dir.exists():
        return f"teamrl: error: disk full while writing {what}; free space on that disk and run the command again"
    from teamrl.training.run_dir import describe_stopped_run

    return describe_stopped_run(run_dir, f"error: disk full while writing {what}; free space on that disk, then "
                                         "resume. The run stopped")


def _chain(err: BaseException) -> list[BaseException]:
    """`err` and the errors it was raised from or while handling, outermost first."""
    links: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and all(current is not seen for seen in links):
        links.append(current)
        current = current.__cause__ or current.__context__
    return links


def _free_bytes(where: Path) -> int:
    """Bytes free on the disk holding `where` (its nearest existing ancestor); 0 when it cannot be read."""
    for folder in (where, *where.parents):
        if folder.exists():
            try:
                return shutil.disk_usage(folder).free
            except OSError:
                return 0
    return 0
