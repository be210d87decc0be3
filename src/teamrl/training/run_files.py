"""Writing inside a run directory without touching anything teamrl did not write there.

A run directory may hold a user's own files and links next to teamrl's. teamrl writes, truncates,
renames and deletes only the names it owns, and never through a symbolic link: files are opened with
O_NOFOLLOW, and a folder is checked with `os.lstat` before it is renamed or deleted. A link, FIFO or
other non-regular file where teamrl expects its own is refused with `RunFileError`, whose one line
says what is wrong and how to fix it; nothing has been changed by then, so the same command works
again once the user has fixed it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import TextIO

# The append-only logs teamrl writes at the top of a run directory: the only files a resume cuts back to
# their length at the checkpoint (or removes, when they were created after it). Any other `*.jsonl`
# there (a user's notes, a link) is never opened.
RUN_LOGS = ("metrics.jsonl", "alerts.jsonl")
CONFIG_FILE = "config.yaml"
SUMMARY_FILE = "summary.json"


class RunFileError(RuntimeError):
    """A name teamrl owns in a run directory is a symbolic link or not a regular file or folder."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _link_target(path: Path) -> str:
    try:
        return f" (to {os.readlink(path)})"
    except OSError:
        return ""


def check_regular_file(path: Path, what: str) -> bool:
    """Whether `path` exists; RunFileError when it is there but is no regular file (a link, FIFO, folder...)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(mode):
        kind = _kind(mode)
        target = _link_target(path) if stat.S_ISLNK(mode) else ""
        raise RunFileError(
            f"{path} is {kind}{target}, not the {what} teamrl wrote there; teamrl does not "
            "follow links or read and write special files in a run directory: replace it by a "
            "regular file (a copy of what it points to) or remove it, then run the command again"
        )
    return True


def check_real_folder(path: Path, what: str) -> bool:
    """Whether `path` exists; RunFileError when it is a symbolic link or no folder."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        raise RunFileError(
            f"{path} is a symbolic link{_link_target(path)}; teamrl keeps {what} as a real folder "
            "inside the run directory and does not rename or delete through links: put the folder "
            "itself there (remove the link, then move or copy its target into its place) or "
            "remove the link, then run the command again"
        )
    if not stat.S_ISDIR(mode):
        raise RunFileError(
            f"{path} is {_kind(mode)}, not the folder of {what} teamrl wrote there; move it "
            "away, then run the command again"
        )
    return True


def _open_no_follow(path: Path, flags: int, what: str) -> int:
    try:
        return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:  # O_NOFOLLOW met a link: name it the way check_regular_file does
            check_regular_file(path, what)
        raise


def write_text(path: Path, text: str, what: str) -> None:
    """Replace the content of the regular file `path` (created when missing), never through a link."""
    check_regular_file(path, what)
    fd = _open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, what)
    with open(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def open_append(path: Path, what: str, buffering: int = -1) -> TextIO:
    """`path` opened for appending text (created when missing), never through a link."""
    check_regular_file(path, what)
    fd = _open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, what)
    return open(fd, "a", buffering=buffering, encoding="utf-8")


def truncate(path: Path, size: int, what: str) -> None:
    """Cut the regular file `path` to `size` bytes, never through a link."""
    check_regular_file(path, what)
    fd = _open_no_follow(path, os.O_WRONLY, what)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def remove(path: Path, what: str) -> None:
    """Delete the regular file `path` when present (a link or special file in its place is refused)."""
    if check_regular_file(path, what):
        path.unlink()
