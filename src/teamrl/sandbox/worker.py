"""The warm worker process: receives requests from the grader and forks one child per program.

Started by `pool.py` as `python -I -c <bootstrap> <package dir> <config json>` with a scrubbed
environment, so it shares nothing with the grader except two pipes. It applies the process-wide
isolation once (namespaces, see isolation.py), pre-imports common modules so programs start
fast, and then for each request:

1. makes a fresh directory for the program (owned by the program's user id),
2. forks; the child confines itself (child.py) and runs the program,
3. supervises it: feeds stdin, collects stdout/stderr up to the caps, enforces the wall clock,
4. kills the program's process group, reaps it, then kills and reaps anything else the program
   left behind (the worker is a child subreaper, so every leftover process is its descendant),
5. deletes the program's files and answers with the result.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import shutil
import signal
import sys
import time
from typing import Any

from . import child, isolation, protocol

_READ_CHUNK = 65536


class WorkerState:
    """Per-worker settings decided at start-up."""

    def __init__(self, report: dict[str, Any], hide_paths: list[str]):
        self.report = report
        self.scratch: str = report["scratch"]
        self.uid: int | None = report["sandbox_uid"]
        self.user_namespace: bool = report["user_namespace"]
        self.private_tmp = report["filesystem"] == "readonly-mount-namespace"
        self.pid = os.getpid()
        self.counter = 0
        self.tainted = False  # set when leftovers could not be cleaned; the grader restarts us
        self.guard_template: dict[str, Any] | None = None
        block_network = report["network"] != "netns"
        restrict_files = not self.private_tmp or self.uid is None
        block_processes = self.uid is None  # without our own uid, RLIMIT_NPROC cannot contain forks
        if block_network or restrict_files or block_processes:
            self.guard_template = {
                "block_network": block_network, "restrict_files": restrict_files,
                "block_processes": block_processes, "hidden_paths": hide_paths,
            }
        report["guards"] = {k: v for k, v in (self.guard_template or {}).items() if k != "hidden_paths"}

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


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            return [int(x) for x in fh.read().split()]
    except FileNotFoundError:  # kernel without CONFIG_PROC_CHILDREN: scan every process
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                        stat = fh.read()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        return found


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
        kids = _children(state.pid)
        if not kids:
            return
        if time.monotonic() > give_up:
            state.tainted = True
            return
        if state.uid is not None:
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


def supervise(pid: int, start: float, limits: dict[str, Any], stdin_fd: int, stdin_data: bytes,
              out_fds: list[int]) -> dict[str, Any]:
    """Feed stdin, collect output, enforce the wall clock and output caps; reap the child."""
    cap = limits["max_output_bytes"]
    pidfd = os.pidfd_open(pid)
    bufs = {fd: bytearray() for fd in out_fds}
    poller = select.poll()
    for fd in out_fds:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    pending = memoryview(stdin_data)
    if pending:
        os.set_blocking(stdin_fd, False)
        poller.register(stdin_fd, select.POLLOUT)
    else:
        os.close(stdin_fd)
        stdin_fd = -1
    deadline = start + limits["wall_time_s"]
    timed_out = over = exited = False
    open_outputs = set(out_fds)
    while not (exited or over):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for fd, _event in poller.poll(remaining * 1000):
            if fd == pidfd:
                exited = True
            elif fd == stdin_fd:
                try:
                    pending = pending[os.write(stdin_fd, pending[:_READ_CHUNK]):]
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:  # the program closed stdin / exited
                    pending = memoryview(b"")
                if not pending:
                    poller.unregister(stdin_fd)
                    os.close(stdin_fd)
                    stdin_fd = -1
            elif fd in open_outputs:
                if not _drain(fd, bufs[fd], cap):
                    poller.unregister(fd)
                    open_outputs.discard(fd)
                if len(bufs[fd]) > cap:
                    over = True
    # Kill the whole process group while the leader is still unreaped (so its id cannot be reused).
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    for fd in open_outputs:
        _drain(fd, bufs[fd], cap)
    for fd in [*out_fds, pidfd] + ([stdin_fd] if stdin_fd >= 0 else []):
        os.close(fd)
    return {"status": status, "cpu": usage.ru_utime + usage.ru_stime, "timed_out": timed_out,
            "over": over or any(len(b) > cap for b in bufs.values()), "wall": wall,
            "outputs": [bytes(bufs[fd][:cap]) for fd in out_fds]}


def classify(outcome: dict[str, Any], limits: dict[str, Any], stderr: str) -> tuple[str, int | None, bool]:
    """(status, exit_code, timed_out) for a supervised child."""
    status = outcome["status"]
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    cpu_limit = max(1.0, float(int(-(-limits["cpu_time_s"] // 1))))
    if outcome["timed_out"]:
        return "timeout", exit_code, True
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


# ----------------------------------------------------------------------------- requests


def run_request(state: WorkerState, req: dict[str, Any]) -> dict[str, Any]:
    """Run one program (op "run") and describe the outcome."""
    limits = req["limits"]
    workdir = state.new_workdir()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            child.run_program(req["code"], {0: in_r, 1: out_w, 2: err_w}, workdir, limits, state.uid,
                              state.pid, state.user_namespace, state.guard_config(workdir))
        finally:
            os._exit(child.SETUP_FAILED_EXIT)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    try:
        outcome = supervise(pid, start, limits, in_w, req.get("stdin", "").encode("utf-8"), [out_r, err_r])
    finally:
        kill_leftovers(state)
        remove_files(state, workdir)
    stdout, stderr = (b.decode("utf-8", errors="replace") for b in outcome["outputs"])
    status, exit_code, timed_out = classify(outcome, limits, stderr)
    return {"stdout": stdout, "stderr": stderr, "exit_code": exit_code, "timed_out": timed_out,
            "status": status, "wall_s": outcome["wall"]}


def main(config_json: str) -> None:
    """Worker entry point (see module docstring)."""
    config = json.loads(config_json)
    # Keep the grader pipes away from fds 0/1 so that nothing printing by accident corrupts them.
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    for name in config["preimport"]:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    python_paths = [sys.prefix, sys.base_prefix, os.path.dirname(os.__file__)] + [p for p in sys.path if p]
    report = isolation.setup_worker(config["fallback_scratch"], config["hide_paths"], config["parent_pid"],
                                    config["os_isolation"], config["tmpfs_mb"], python_paths)
    state = WorkerState(report, report["hidden_paths"] or config["hide_paths"])
    os.makedirs(state.scratch, mode=0o711, exist_ok=True)
    os.chmod(state.scratch, 0o711 if state.uid is not None else 0o700)
    child.remember_own_modules()
    gc.collect()
    gc.freeze()  # forked children then do not touch (copy) the pages of these objects
    protocol.send_message(out_fd, {"ready": True, "pid": state.pid, "isolation": report})
    while True:
        try:
            req = protocol.recv_message(in_fd)
        except protocol.ProtocolError:
            break  # the grader closed the pipe: shut down
        op = req.get("op")
        try:
            if op == "run":
                reply = run_request(state, req)
            elif op == "quit":
                break
            else:
                reply = {"error": f"unknown op {op!r}"}
        except Exception as exc:  # noqa: BLE001 - report worker bugs instead of dying silently
            reply = {"error": f"worker failed: {exc!r}"}
            state.tainted = True
        reply["tainted"] = state.tainted
        protocol.send_message(out_fd, reply)
        if state.tainted:
            break
    kill_leftovers(state)
    if not state.private_tmp:
        shutil.rmtree(state.scratch, ignore_errors=True)
    sys.exit(0)
