"""The run directory: resolved config, metrics.jsonl (+ the `report_to` trackers), checkpoints.

Also what keeps it consistent: one writer at a time (`RunLock`, a lock on RUN_DIR itself, taken by
`claim_run` before anything is read), a new run that fails before its first step leaves no
directory behind, and a stopped run is described with the command that resumes it.

teamrl touches only the files it writes here (`run_files`): config.yaml, the logs `RUN_LOGS`,
summary.json, transcripts/, checkpoints/ and .lock, always as regular files and real folders, never
through a symbolic link; a user's own files in the run directory are never opened.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from teamrl.config import RunConfig, config_to_dict
from teamrl.policies.loading import Policy
from teamrl.training.checkpoint import CheckpointError, discard_after, step_checkpoints, write_checkpoint
from teamrl.training.disk_full import DiskFullError, is_disk_full, what_was_written
from teamrl.training.resume import ResumePoint, find_resume_point
from teamrl.training.run_files import (
    CONFIG_FILE,
    RUN_LOGS,
    SUMMARY_FILE,
    check_real_folder,
    check_regular_file,
    open_append,
    remove,
    truncate,
    write_text,
)
from teamrl.training.run_log import RunLog
from teamrl.training.trackers import open_trackers, resolve_report_to


class RunLockedError(RuntimeError):
    """Another live process holds the lock of the run directory."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during training; `run_dir` says where the run is (it may have been removed)."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(str(run_dir))
        self.run_dir = run_dir


LOCK_FILE = ".lock"
# flock errors that mean "this file system cannot lock a directory" (NFS emulates flock with POSIX
# locks, which need a file open for writing), not "somebody holds it".
_NO_DIRECTORY_LOCKS = (errno.EBADF, errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP)


class RunLock:
    """An exclusive OS lock (`flock`) on the run directory itself, so two processes never write one run directory.

    The lock is taken on the directory (opened read-only), not on a file inside it: deleting
    RUN_DIR/.lock, which only holds the holder's pid to name it in the error, lets nobody in. (On
    a file system that cannot lock directories, such as NFS, the .lock file is locked instead.)
    The kernel drops the lock when the holder dies, however it dies (kill -9 included), so a stale
    .lock file never blocks anybody.
    """

    def __init__(self, path: Path, create: bool = True) -> None:
        """Lock `path` (creating it when `create`); RunLockedError when a live process holds it."""
        self.path = path
        # The folders this lock creates (output_dir too when it is new), innermost first: removed on discard.
        self.created = [folder for folder in (path, *path.parents) if not folder.exists()] if create else []
        if create:
            path.mkdir(parents=True, exist_ok=True)
        while True:
            fd, target = _lock(path)
            # A holder that removed the directory (a run that failed before its first step) may have
            # deleted what we locked: then lock the new directory instead.
            try:
                locked, now = os.fstat(fd), os.stat(target)
                same = (locked.st_dev, locked.st_ino) == (now.st_dev, now.st_ino)
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
            path.mkdir(parents=True, exist_ok=True)
        try:
            write_text(path / LOCK_FILE, f"{os.getpid()}\n", "lock file")
        except BaseException:  # a read-only run directory, a link as .lock: nobody is left locked out
            os.close(fd)
            raise
        self._fd: int | None = fd

    def release(self, discard: bool = False) -> None:
        """Unlock; with `discard`, also remove the run directory when this lock created it."""
        if self._fd is None:
            return
        if discard and self.created:
            shutil.rmtree(self.path, ignore_errors=True)  # while still locked: nobody sees it half-deleted
            for parent in self.created[1:]:
                try:  # only while empty: another run may have started in a new output_dir meanwhile
                    parent.rmdir()
                except OSError:
                    break
        os.close(self._fd)
        self._fd = None


def _lock(path: Path) -> tuple[int, Path]:
    """(an fd holding an exclusive flock, what it locks): the directory `path`, or path/.lock where
    the file system cannot lock directories. RunLockedError when another process holds it."""
    try:
        return _flock(os.open(path, os.O_RDONLY), path), path
    except OSError as err:
        if err.errno not in _NO_DIRECTORY_LOCKS:
            raise
    target = path / LOCK_FILE
    return _flock(os.open(target, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644), path), target


def _flock(fd: int, path: Path) -> int:
    """`fd`, exclusively locked; else it is closed (RunLockedError when a process holds run `path`)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunLockedError(
            f"run directory {path} is being written by another teamrl process (pid {_holder(path)}); wait "
            "for it to end or stop it, or pick another run_name"
        ) from None
    except OSError:
        os.close(fd)
        raise
    return fd


def _holder(path: Path) -> str:
    """The pid the holder wrote to path/.lock, or why it is not known."""
    try:
        return (path / LOCK_FILE).read_text(errors="replace").strip()[:32] or "unknown"
    except OSError:
        return f"unknown: {LOCK_FILE} was deleted"


def claim_run(config: RunConfig) -> tuple[RunLock | None, ResumePoint | None]:
    """Lock the run directory `train(config)` will write, then find where it resumes, before any work.

    Returns (the lock, or None when an explicit resume target is no run directory: find_resume_point
    then says why; the resume point, None for a new run). A new run's directory must not hold a run.
    """
    path, create = planned_run_path(config)
    lock = RunLock(path, create) if create or (path / "metrics.jsonl").is_file() else None
    try:
        resume = find_resume_point(config)
        if resume is None:
            refuse_existing_run(path)
    except BaseException:
        if lock is not None:
            lock.release(discard=True)
        raise
    return lock, resume


def refuse_existing_run(path: Path) -> None:
    """FileExistsError when `path` already holds a run (a new run must not mix into it)."""
    if (path / "metrics.jsonl").exists():
        raise FileExistsError(
            f"run directory {path} already holds a run; pick another run_name, delete it, "
            "or continue it with --resume (train.resume)"
        )


def planned_run_path(config: RunConfig) -> tuple[Path, bool]:
    """(the run directory `train(config)` writes, whether it may be created) before any file is read.

    An explicit `train.resume` names an existing run directory or one of its checkpoint folders
    (it is never created); otherwise `output_dir/run_name`, with a timestamped default name.
    """
    wanted = config.train.resume
    if wanted and wanted != "auto":
        target = Path(wanted).expanduser()
        return (target.parent.parent if target.parent.name == "checkpoints" else target), False
    return Path(config.output_dir) / (config.run_name or default_run_name(config)), True


def default_run_name(config: RunConfig) -> str:
    return (
        f"{config.task['name']}-{config.workflow.name}-{config.regime}-{config.algorithm.grouping}-"
        f"s{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    )


class RunDirectory:
    """Owns every file a run writes."""

    def __init__(self, config: RunConfig, resume: ResumePoint | None = None, lock: RunLock | None = None) -> None:
        """A new run directory, or (resume) the existing one cut back to the checkpoint's step.

        lock: the held lock of this directory (`RunLock`); the run directory releases it on close.
        """
        self._lock = lock
        self._fresh = resume is None
        self._stepped = False  # whether a training step was logged (a failure before it discards a fresh run)
        if resume is not None:
            self.path = resume.run_path
            self._roll_back(resume)
        else:
            self.path = (
                lock.path
                if lock is not None
                else Path(config.output_dir) / (config.run_name or default_run_name(config))
            )
            refuse_existing_run(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        write_text(self.path / CONFIG_FILE, yaml.safe_dump(config_to_dict(config), sort_keys=False), "run config")
        self._metrics = open_append(self.path / "metrics.jsonl", "metrics log", buffering=1)
        self._log = RunLog(self.path)  # warnings and library log records: train.log, not the terminal
        try:  # a resumed run logs again from the step after its checkpoint (from 0 without one)
            self._trackers = open_trackers(
                resolve_report_to(config.report_to),
                self.path,
                config.project,
                config_to_dict(config),
                None if resume is None else (resume.step + 1 if resume.loop else 0),
            )
        except BaseException:
            self._metrics.close()
            self._log.close()
            raise

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def _roll_back(self, resume: ResumePoint) -> None:
        """Drop what the stopped run wrote after the checkpoint: log lines, later checkpoints, summary.

        Each of teamrl's append-only logs (`RUN_LOGS`) is cut to its length at the checkpoint, or
        removed when it did not exist then; no other file is opened.
        """
        logs = [self.path / name for name in RUN_LOGS if check_regular_file(self.path / name, f"run log {name}")]
        for log in logs:  # every check first: a refused roll-back has changed nothing
            keep = resume.log_bytes.get(log.name, 0)
            if log.stat().st_size < keep:
                raise CheckpointError(
                    f"{log} is shorter ({log.stat().st_size} bytes) than when {resume.checkpoint} "
                    f"was written ({keep}); the run directory was modified"
                )
        discard_after(self.checkpoints, resume.step)
        for log in logs:  # metrics.jsonl marks the folder as a run: kept (empty) even from step 0
            if log.name in resume.log_bytes or log.name == "metrics.jsonl":
                truncate(log, resume.log_bytes.get(log.name, 0), f"run log {log.name}")
            else:
                remove(log, f"run log {log.name}")
        remove(self.path / SUMMARY_FILE, "run summary")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Append one JSON line; non-finite values are written as null, never dropped."""
        clean = {k: (v if isinstance(v, (int, float)) and math.isfinite(v) else None) for k, v in metrics.items()}
        self._metrics.write(json.dumps({"step": step, **clean}) + "\n")
        self._stepped = self._stepped or step > 0
        self._trackers.log(step, clean)

    def write_json(self, name: str, payload: Any) -> Path:
        """Write `payload` as RUN_DIR/name (`name` may name a folder of the run: transcripts/...)."""
        target = self.path / name
        for folder in reversed(target.relative_to(self.path).parents[:-1]):  # e.g. transcripts/
            if not check_real_folder(self.path / folder, f"run folder {folder}"):
                (self.path / folder).mkdir()
        write_text(target, json.dumps(payload, indent=2, default=str), f"run file {name}")
        return target

    def save_checkpoint(self, tag: str, policies: dict[str, Policy]) -> Path:
        """Weights only, one HF folder per policy under checkpoints/<tag>/<policy>/, written atomically."""
        return write_checkpoint(self.checkpoints, tag, policies)

    def sync_logs(self) -> dict[str, int]:
        """Flush teamrl's logs of the run (`RUN_LOGS`) to disk; returns their lengths in bytes."""
        self._metrics.flush()
        sizes = {}
        for name in RUN_LOGS:
            log = self.path / name
            if check_regular_file(log, f"run log {name}"):
                descriptor = os.open(log, os.O_RDONLY | os.O_NOFOLLOW)
                try:
                    os.fsync(descriptor)
                    sizes[name] = os.fstat(descriptor).st_size
                finally:
                    os.close(descriptor)
        return sizes

    def close(self, failed: bool = False) -> None:
        """Close the logs and the trackers, and release the lock.

        failed: the run is ending on an error or Ctrl-C. A new run that logged no training step yet
        is then removed (when its lock created the directory), so that re-running the same command
        is not refused for a directory holding nothing worth keeping.
        """
        try:
            self._metrics.close()
            self._log.close()
            # summary.json is the loop's last write: a run closed without one stopped early, and its
            # tracker runs are marked failed.
            self._trackers.close(failed=failed or not (self.path / SUMMARY_FILE).exists())
        except OSError:
            if not failed:  # a failing run (a full disk, say) keeps its own error, not this echo of it
                raise
        finally:
            if self._lock is not None:
                self._lock.release(discard=failed and self._fresh and not self._stepped)


def describe_stopped_run(path: Path, how: str = "interrupted") -> str:
    """One line for a run stopped mid-way: its directory, last logged step, newest checkpoint, the resume command."""
    if not path.exists():
        return f"teamrl: {how} before the first training step; nothing was kept ({path} was removed)"
    last = 0
    metrics = path / "metrics.jsonl"
    with open(metrics if metrics.exists() else os.devnull, encoding="utf-8") as handle:
        for line in handle:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut by the interruption
                continue
            if isinstance(row, dict) and "train/success" in row and isinstance(row.get("step"), int):
                last = max(last, row["step"])
    saved = yaml.safe_load((path / "config.yaml").read_text()) if (path / "config.yaml").exists() else None
    total = ((saved or {}).get("train") or {}).get("steps")
    checkpoints = step_checkpoints(path / "checkpoints")
    if checkpoints:
        step, folder = checkpoints[-1]
        where = f"newest resumable checkpoint {folder} (step {step}; steps after it are redone)"
    else:
        where = "no resumable checkpoint (train.checkpoint_every was 0), so resuming restarts it from step 0"
    command = shlex.join(["teamrl", "train", str(path / "config.yaml"), "--resume", str(path)])
    return (
        f"teamrl: {how} after step {last}{f' of {total}' if total else ''}; run directory {path}, "
        f"{where}. Resume with: {command}"
    )


def disk_full_message(err: BaseException) -> str | None:
    """The CLI's line for a full disk (None when `err` is something else): what was being written,
    and how to go on (free space, then resume the run, or run the command again)."""
    if not is_disk_full(err):
        return None
    what = what_was_written(err, "a file")
    run_dir = err.run_dir if isinstance(err, DiskFullError) else None
    if run_dir is None or not run_dir.exists():
        return f"teamrl: error: disk full while writing {what}; free space on that disk and run the command again"
    return describe_stopped_run(
        run_dir, f"error: disk full while writing {what}; free space on that disk, then resume. The run stopped"
    )
