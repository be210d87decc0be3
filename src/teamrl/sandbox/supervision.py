"""Process supervision for the worker: per-program state, output collection, timeouts, cleanup.

`supervise` watches one forked process (feeding stdin, collecting capped output, enforcing the
wall clock, the idle limit and the CPU limit of the whole process tree, see proctree.IdleClock
and proctree.TreeCpuClock); `kill_leftovers` then kills and reaps
every other descendant of the worker (the worker is pid 1 of its own PID namespace, or else a
child subreaper, so nothing a program starts can escape being its descendant); `remove_files`
deletes what the program wrote.
"""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import signal
import struct
import termios
import time
from typing import Any

from . import child, proctree
from .proctree import SAMPLE_INTERVAL_S, IdleClock, TreeCpuClock

_READ_CHUNK = 65536


class WorkerState:
    """Per-worker settings decided at start-up."""

    def __init__(self, report: dict[str, Any], hide_paths: list[str]):
        """report: isolation.setup_worker's; hide_paths: denied even inside the visible paths."""
        self.report = report
        self.scratch: str = report["scratch"]
        self.uid: int | None = report["sandbox_uid"]
        self.user_namespace: bool = report["user_namespace"]
        self.private_tmp = report["filesystem"] == "allowlist-root"
        self.pid = os.getpid()
        # pid 1 of a namespace of our own: kill(-1) then reaches exactly the programs' processes.
        self.pid_namespace: bool = report["pid_namespace"] and self.pid == 1
        self.confinement = child.Confinement(
            self.uid,
            self.pid,
            self.user_namespace,
            private_ipc=report["ipc"] == "per-program",
            syscall_filter=report["syscall_filter"],
        )
        self.counter = 0
        self.tainted = False  # set when leftovers could not be cleaned; the grader restarts us
        self.guard_template: dict[str, Any] | None = None
        block_network = report["network"] != "netns"
        restrict_files = not self.private_tmp or self.uid is None
        # Without our own uid, RLIMIT_NPROC cannot contain forks; without the new root, an exec'd
        # binary would read files unchecked (the guards live in the Python interpreter only).
        block_processes = self.uid is None or not self.private_tmp
        if block_network or restrict_files or block_processes:
            self.guard_template = {
                "block_network": block_network,
                "restrict_files": restrict_files,
                "block_processes": block_processes,
                "hidden_paths": hide_paths,
                "read_roots": report["visible_paths"],
                "block_host_shm": not self.private_tmp,
            }
        report["guards"] = {
            k: v for k, v in (self.guard_template or {}).items() if k not in ("hidden_paths", "read_roots")
        }

    def new_workdir(self) -> str:
        self.counter += 1
        path = os.path.join(self.scratch, f"prog-{self.counter}")
        os.mkdir(path, 0o700)
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)
        return path

    def guard_config(self, workdir: str) -> dict[str, Any] | None:
        if self.guard_template is None:
            return None
        return dict(self.guard_template, workdir=workdir)


# ----------------------------------------------------------------------------- cleanup


def _reap_zombies() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_uid(uid: int) -> None:
    """Kill every process of `uid` at once: kill(-1) from a helper that runs as that uid.

    kill(-1) walks the process list under the kernel's tasklist lock, so a fork bomb cannot add
    processes while it runs. The helper checks it really dropped root first: kill(-1) as root
    would hit every process on the machine.
    """
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(uid, uid, uid)
            if 0 not in os.getresuid():
                os.kill(-1, signal.SIGKILL)
        except BaseException:  # noqa: BLE001
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def kill_leftovers(state: WorkerState, deadline_s: float = 5.0) -> None:
    """Kill and reap every remaining descendant of the worker."""
    give_up = time.monotonic() + deadline_s
    while True:
        _reap_zombies()
        kids = proctree.children(state.pid)
        if not kids:
            return
        if time.monotonic() > give_up:
            state.tainted = True
            return
        if state.pid_namespace:
            # Atomic like _kill_uid (kill(-1) holds the tasklist lock), and needs no user id.
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        elif state.uid is not None:
            _kill_uid(state.uid)
        for kid in kids:
            for kill in (os.killpg, os.kill):
                try:
                    kill(kid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.001)


def _force_rmtree(path: str) -> None:
    def retry(func: Any, target: str, _exc: Any) -> None:
        # A program may have removed permissions from its own directories (matters without root).
        try:
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
        except OSError:
            pass
        try:
            func(target)
        except FileNotFoundError:
            pass

    shutil.rmtree(path, onerror=retry)


def remove_files(state: WorkerState, workdir: str) -> None:
    """Delete the program's directory (and, in the private /tmp, anything else it left there)."""
    if state.private_tmp:
        for entry in os.scandir(state.scratch):
            if entry.is_dir(follow_symlinks=False):
                _force_rmtree(entry.path)
            else:
                os.unlink(entry.path)
    else:
        _force_rmtree(workdir)
    if os.path.exists(workdir):
        state.tainted = True


# ----------------------------------------------------------------------------- supervision


def _drain(fd: int, buf: bytearray, cap: int) -> bool:
    """Read what is available now from a non-blocking fd; return False once it hit EOF."""
    while len(buf) <= cap:
        try:
            data = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return True
        if not data:
            return False
        buf += data
    return True


def _nearly_full(fd: int) -> bool:
    """Whether the pipe read through `fd` is too full for another atomic write: its writer may
    have been blocked, waiting for us (the program can resize the pipe, so ask its size)."""
    available = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    return available > fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) - select.PIPE_BUF


def supervise(
    pid: int,
    start: float,
    wall_s: float,
    stdin_fd: int,
    stdin_data: bytes,
    streams: list[tuple[int, int, bool]],
    kill_on_over: int | None = None,
    idle: IdleClock | None = None,
    cpu: TreeCpuClock | None = None,
) -> dict[str, Any]:
    """Feed stdin, collect output, enforce the wall clock, the idle and CPU limits and output caps; reap `pid`.

    streams: (fd, cap, capped) read until `pid` exits; for `capped` streams going over `cap`
    means "output_limit": supervision stops, or, with `kill_on_over`, that process group is
    killed and supervision of `pid` goes on. `stdin_fd` < 0 means no stdin pipe.
    idle: the program's idle clock; cpu: the CPU clock of its process tree. Both are fed by one
    look at the processes below this (the worker's) process every SAMPLE_INTERVAL_S; supervision
    stops once either is over its limit.
    """
    pidfd = os.pidfd_open(pid)
    bufs = {fd: bytearray() for fd, _, _ in streams}
    caps = {fd: cap for fd, cap, _ in streams}
    capped = {fd for fd, _, is_capped in streams if is_capped}
    poller = select.poll()
    for fd in bufs:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    pending = memoryview(stdin_data)
    if stdin_fd >= 0 and pending:
        os.set_blocking(stdin_fd, False)
        poller.register(stdin_fd, select.POLLOUT)
    elif stdin_fd >= 0:
        os.close(stdin_fd)
        stdin_fd = -1
    deadline = start + wall_s
    timed_out = over = exited = idled = cpu_over = False
    next_look = start
    worked_for_it = False  # the worker had input or output to handle since the last idle sample
    open_outputs = set(bufs)
    while not exited and not (over and kill_on_over is None):
        now = time.monotonic()
        remaining = deadline - now
        if remaining <= 0:
            timed_out = True
            break
        if idle is not None or cpu is not None:
            if now >= next_look:
                found = proctree.scan(os.getpid())
                next_look = now + SAMPLE_INTERVAL_S
                if cpu is not None:
                    cpu.account(found)
                    if cpu.over:
                        cpu_over = True
                        break
                if idle is not None:
                    idle.sample(now, credit=not worked_for_it, found=found)
                    worked_for_it = False
                    if idle.over:
                        idled = True
                        break
            remaining = min(remaining, max(next_look - now, 0.001))
        for fd, _event in poller.poll(remaining * 1000):
            if fd == pidfd:
                exited = True
            elif fd == stdin_fd:
                worked_for_it = True  # the program may have been waiting to read this
                try:
                    pending = pending[os.write(stdin_fd, pending[:_READ_CHUNK]) :]
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:  # the program closed stdin / exited
                    pending = memoryview(b"")
                if not pending:
                    poller.unregister(stdin_fd)
                    os.close(stdin_fd)
                    stdin_fd = -1
            elif fd in open_outputs:
                worked_for_it = worked_for_it or (idle is not None and _nearly_full(fd))
                if not _drain(fd, bufs[fd], caps[fd]):
                    poller.unregister(fd)
                    open_outputs.discard(fd)
                if fd in capped and len(bufs[fd]) > caps[fd] and not over:
                    over = True
                    if kill_on_over is not None:
                        _killpg(kill_on_over)
    # Kill the whole process group while the leader is still unreaped (so its id cannot be reused).
    _killpg(pid)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    for fd in open_outputs:
        _drain(fd, bufs[fd], caps[fd])
    for fd in [*bufs, pidfd] + ([stdin_fd] if stdin_fd >= 0 else []):
        os.close(fd)
    # The program's own rusage counts the children it reaped; the tree clock also those it did not.
    used = max(usage.ru_utime + usage.ru_stime, cpu.cpu_s if cpu is not None else 0.0)
    return {
        "status": status,
        "cpu": used,
        "timed_out": timed_out,
        "cpu_over": cpu_over,
        "idle": idled,
        "idle_s": idle.idle_s if idle is not None else 0.0,
        "over": over or any(len(bufs[fd]) > caps[fd] for fd in capped),
        "wall": wall,
        "outputs": [bytes(bufs[fd][: caps[fd]]) for fd, _, _ in streams],
    }


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def classify(outcome: dict[str, Any], limits: dict[str, Any], stderr: str) -> tuple[str, int | None, bool]:
    """(status, exit_code, timed_out) for a supervised child."""
    status = outcome["status"]
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    cpu_limit = child.cpu_limit_s(limits)
    if outcome["timed_out"] or outcome.get("idle"):
        return "timeout", exit_code, True
    if outcome.get("cpu_over"):  # the process tree used up the CPU limit together
        return "timeout", None, True
    if outcome["over"]:
        return "output_limit", exit_code, False
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and outcome["cpu"] >= cpu_limit - 0.05):
            return "timeout", None, True
        return "killed", None, False
    if exit_code == child.SETUP_FAILED_EXIT and "teamrl-sandbox: could not confine" in stderr:
        return "sandbox_error", exit_code, False
    if exit_code == 0:
        return "ok", 0, False
    tail = stderr.rstrip().rsplit("\n", 1)[-1]
    if tail.startswith("MemoryError"):
        return "memory", exit_code, False
    return "error", exit_code, False
