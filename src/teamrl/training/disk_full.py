"""A disk that fills up while a run writes: recognised however it surfaces, and named as such.

A full disk reaches teamrl as OSError ENOSPC (or EDQUOT, a quota) from Python's own writes, as a
message inside another library's error (safetensors: "No space left on device"), or, from
torch.save to a path, as a RuntimeError without any errno ("unexpected pos ..."): teamrl's own
torch writes go through Python files (`checkpoint.save_torch`) so that the errno survives, and
that last form is taken for a full disk only when the disk has almost no space left.
A disk that cannot be written at all (a read-only mount, EROFS) is named too (`read_only_message`).
The CLI's line for a full disk, with the command that resumes the stopped run, is
`run_dir.disk_full_message` (it reads the run directory).
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


def read_only_message(err: BaseException) -> str | None:
    """The CLI's line for a write refused by a read-only file system (None when `err` is something else)."""
    for link in _chain(err):
        if isinstance(link, OSError) and link.errno == errno.EROFS:
            what = str(link.filename) if link.filename else "a file"
            return (
                f"teamrl: error: cannot write {what}: it is on a read-only file system; give a folder on a "
                "writable disk (output_dir=... for train, --out for report and transcripts), or copy a run "
                "directory to a writable disk to resume or report it there"
            )
    return None


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
