"""Checkpoint folders: written atomically, verified before use, rotated.

A checkpoint is `checkpoints/<tag>/` in the run directory:

    <policy>/                one folder per policy by save_policy: an HF model, or a PEFT adapter
    <policy>/optimizer.pt    that policy's AdamW and LR-scheduler state   (resumable checkpoints)
    trainer_state.pt         loop counters and every RNG state            (resumable checkpoints)
    trainer_state.json       the loop counters, human-readable            (resumable checkpoints)
    COMPLETE                 manifest: size and sha256 of every other file, written last

Everything is written into `<tag>.partial/` and fsynced; COMPLETE is written after all of it, and
only then is the folder renamed to `<tag>`. A write that fails (a full disk) removes its partial
folder. A crash at any point therefore leaves either no `<tag>`
or a `<tag>.partial` / `<tag>.old` that `recover` resolves; a folder without a valid COMPLETE is
never loaded. Deletions (rotation, roll-back) rename to `<tag>.deleting` first, for the same reason.

teamrl renames and deletes only the folders it writes there, and never through a link: a symbolic
link as `checkpoints/` itself or as one of its checkpoint names (`step*`, `best`, `final` and their
`.partial`/`.old`/`.deleting` forms) is refused with one line before anything is changed
(`check_checkpoint_folders`), so the run resumes once the user has put real folders in their place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from teamrl.policies.loading import Policy
from teamrl.policies.storage import CHECKPOINT_MARKER as MARKER
from teamrl.policies.storage import save_policy
from teamrl.training.disk_full import DiskFullError, is_disk_full
from teamrl.training.run_files import check_real_folder

TRAINER_STATE = "trainer_state.pt"
TRAINER_JSON = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.pt"
FORMAT_VERSION = 1
STEP_TAG = re.compile(r"^step(\d+)$")
# Every name teamrl writes in checkpoints/: a tag (stepN, best, final) and its transient forms.
OWNED_NAME = re.compile(r"^(step\d+|best|final)(\.partial|\.old|\.deleting)?$")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, corrupt or does not fit the run being resumed."""


def step_tag(step: int) -> str:
    return f"step{step:05d}"


def check_checkpoint_folders(root: Path) -> bool:
    """Whether the checkpoints folder `root` exists; RunFileError when it, or a checkpoint folder in it
    (a name teamrl writes there), is a symbolic link or not a folder: nothing is renamed or deleted then."""
    if not check_real_folder(root, "the checkpoints"):
        return False
    for path in sorted(root.iterdir()):
        if OWNED_NAME.match(path.name):
            check_real_folder(path, f"checkpoint {path.name}")
    return True


def write_checkpoint(
    root: Path, tag: str, policies: dict[str, Policy], extra: Callable[[Path], None] | None = None
) -> Path:
    """Write `root/<tag>` atomically: policy folders, then `extra(folder)`'s files, then COMPLETE.

    An existing `root/<tag>` is replaced only once the new one is complete.
    """
    if not check_checkpoint_folders(root):
        root.mkdir(parents=True, exist_ok=True)
    partial = root / f"{tag}.partial"
    if partial.exists():  # left by a crash; never complete here, or recover() would have promoted it
        shutil.rmtree(partial)
    partial.mkdir()
    try:
        for name, policy in policies.items():
            save_policy(policy, partial / name)
        if extra is not None:
            extra(partial)
        _seal(partial, tag)
    except Exception as err:  # (a crash or Ctrl-C leaves the partial folder to recover())
        shutil.rmtree(partial, ignore_errors=True)  # never complete, and it holds the space a retry needs
        if is_disk_full(err, root):
            raise DiskFullError(f"checkpoint {root / tag}") from err
        raise
    return _promote(root, partial, tag)


def _promote(root: Path, partial: Path, tag: str) -> Path:
    """Replace `root/<tag>` by the complete `partial` folder."""
    final, old = root / tag, root / f"{tag}.old"
    if final.exists():
        # A directory cannot be renamed over a non-empty one: move the old aside first. A crash
        # between the two renames leaves <tag>.old and a complete <tag>.partial; recover() keeps the new.
        if old.exists():
            shutil.rmtree(old)
        final.rename(old)
    partial.rename(final)
    _fsync_dir(root)
    if old.exists():
        shutil.rmtree(old)
    return final


def link_checkpoint(root: Path, source: str, tag: str) -> Path:
    """`root/<tag>` as a copy of the complete `root/<source>` made of hard links (no bytes written twice;
    a plain copy where the file system has no hard links), sealed under its own tag, atomically."""
    check_checkpoint_folders(root)
    origin, partial = root / source, root / f"{tag}.partial"
    manifest = read_manifest(origin)
    if manifest is None:
        raise FileNotFoundError(f"checkpoint {origin} is not complete; cannot copy it to {tag}")
    if partial.exists():
        shutil.rmtree(partial)
    shutil.copytree(origin, partial, copy_function=_link_or_copy, ignore=shutil.ignore_patterns(MARKER))
    temporary = partial / (MARKER + ".tmp")
    with open(temporary, "w") as handle:  # the same files (sizes, hashes) under the new tag
        json.dump({**manifest, "tag": tag}, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.rename(partial / MARKER)
    return _promote(root, partial, tag)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def save_optimizer(state: Any, folder: Path) -> None:
    """A policy's optimizer and scheduler state (`state` is a training.update.PolicyOptimizer)."""
    save_torch(
        {"optimizer": state.optimizer.state_dict(), "scheduler": state.scheduler.state_dict()}, folder / OPTIMIZER_FILE
    )


def save_torch(obj: Any, path: Path) -> None:
    """torch.save `obj` to `path` through a Python file, so that a full disk raises OSError ENOSPC
    (torch's own writer of a path reports it as a RuntimeError without the errno)."""
    with open(path, "wb") as handle:
        torch.save(obj, handle)


def load_optimizer(state: Any, folder: Path) -> None:
    saved = torch.load(folder / OPTIMIZER_FILE, weights_only=True)
    state.optimizer.load_state_dict(saved["optimizer"])
    state.scheduler.load_state_dict(saved["scheduler"])


def is_complete(folder: Path) -> bool:
    """True when `folder` has a readable COMPLETE manifest and every listed file has its size (cheap)."""
    return incomplete_reason(folder) is None


def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
        return None
    return manifest


def verify(folder: Path) -> None:
    """Raise CheckpointError unless every file of the manifest is present with its size and hash."""
    reason = damage(folder)
    if reason is not None:
        raise CheckpointError(f"checkpoint {folder}: {reason}; delete that checkpoint and resume from an earlier one")


def damage(folder: Path) -> str | None:
    """What is wrong with the checkpoint `folder`, checking every file's size and sha256 (None: nothing)."""
    reason = incomplete_reason(folder)
    if reason is not None:
        return reason
    manifest = read_manifest(folder)
    if manifest is None:
        return f"its manifest {MARKER} cannot be read"
    for rel, (_, digest) in manifest["files"].items():
        if _sha256(folder / rel) != digest:
            return f"{rel} differs from the manifest (its sha256 does not match: corrupt)"
    return None


def _file_problem(path: Path, size: int) -> str | None:
    """What is wrong with a file of a checkpoint that should be `size` bytes, by size alone (None: nothing)."""
    if not path.is_file():
        return "is missing"
    actual = path.stat().st_size
    if actual < size:
        return f"is truncated ({actual} of the {size} bytes the manifest lists)"
    if actual > size:
        return f"differs from the manifest ({actual} bytes, the manifest lists {size})"
    return None


def incomplete_reason(folder: Path) -> str | None:
    """Why the checkpoint `folder` is not complete, from its manifest and file sizes (None: it is)."""
    manifest = read_manifest(folder)
    if manifest is None:
        return f"it is not a complete checkpoint (no valid {MARKER} marker: it was being written when the run stopped)"
    for rel, (size, _) in manifest["files"].items():
        problem = _file_problem(folder / rel, size)
        if problem is not None:
            return f"{rel} {problem}"
    return None


def recover(root: Path) -> None:
    """Finish or undo a replacement that a crash interrupted (see write_checkpoint)."""
    if not check_checkpoint_folders(root):
        return
    for partial in _owned(root, ".partial"):
        final = root / partial.name[: -len(".partial")]
        if not final.exists() and is_complete(partial):
            partial.rename(final)
        else:
            shutil.rmtree(partial)
    for old in _owned(root, ".old"):
        final = root / old.name[: -len(".old")]
        if final.exists():
            shutil.rmtree(old)
        else:
            old.rename(final)
    for doomed in _owned(root, ".deleting"):
        shutil.rmtree(doomed)
    _fsync_dir(root)


def _owned(root: Path, suffix: str) -> list[Path]:
    """The transient folders teamrl writes in `root` with `suffix` (a user's other `*.partial` is left alone)."""
    return sorted(p for p in root.glob(f"*{suffix}") if OWNED_NAME.match(p.name))


def step_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete `step*` checkpoints, oldest first (links are not checkpoints teamrl wrote: left out)."""
    return [(step, p) for step, p in step_folders(root) if is_complete(p)]


def step_folders(root: Path) -> list[tuple[int, Path]]:
    """Every `step*` folder (complete or not; no link), oldest first."""
    if not root.is_dir() or root.is_symlink():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_TAG.match(p.name))]
    return sorted((step, p) for step, p in found if p.is_dir() and not p.is_symlink())


def rotate(root: Path, keep_last: int) -> None:
    """Delete all but the newest `keep_last` step checkpoints (0 keeps all); best/final are not touched."""
    if keep_last <= 0:
        return
    check_checkpoint_folders(root)
    for _, path in step_checkpoints(root)[:-keep_last]:
        _remove(path)


def discard_after(root: Path, step: int) -> None:
    """Remove checkpoints of steps after `step` and the final one: a resumed run recreates them."""
    if not check_checkpoint_folders(root):
        return
    for path in sorted(root.iterdir()):
        match = STEP_TAG.match(path.name)
        if (match and int(match.group(1)) > step) or path.name == "final":
            _remove(path)


def _remove(path: Path) -> None:
    """Delete a checkpoint so that a crash halfway leaves no half-deleted `<tag>` (recover() ends it)."""
    check_real_folder(path, f"checkpoint {path.name}")
    doomed = path.with_name(path.name + ".deleting")
    path.rename(doomed)
    _fsync_dir(path.parent)
    shutil.rmtree(doomed)


def _seal(folder: Path, tag: str) -> None:
    """fsync every file, then write the manifest (itself via a temporary name) and fsync the folder."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
        files[path.relative_to(folder).as_posix()] = (path.stat().st_size, _sha256(path))
    for sub in sorted({p.parent for p in folder.rglob("*") if p.is_file()}):
        _fsync_dir(sub)
    temporary = folder / (MARKER + ".tmp")
    with open(temporary, "w") as handle:
        json.dump({"format": FORMAT_VERSION, "tag": tag, "files": files}, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.rename(folder / MARKER)
    _fsync_dir(folder)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
