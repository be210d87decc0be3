"""The grader's handle on one worker process: start it, talk to it, stop it and all its programs."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import protocol

PACKAGE_DIR = str(Path(__file__).resolve().parent)
# Loads this directory as a stand-alone package named `_teamrl_sandbox`, so the worker does not
# import `teamrl` (and whatever heavy modules its __init__ pulls in). The directory and the
# configuration arrive as the first message on the request pipe, not as arguments: programs can
# read the worker's command line (/proc/<pid>/cmdline, their own included, as forks of it), which
# must name no path of the grader's.
_BOOTSTRAP = (
    "import json,os,struct,sys,types\n"
    "def read(n):\n"
    " b=b''\n"
    " while len(b)<n:\n"
    "  c=os.read(0,n-len(b))\n"
    "  if not c:sys.exit(1)\n"
    "  b+=c\n"
    " return b\n"
    "start=json.loads(read(struct.unpack('>I',read(4))[0]))\n"
    "p=types.ModuleType('_teamrl_sandbox');p.__path__=[start.pop('package_dir')];sys.modules['_teamrl_sandbox']=p\n"
    "del read\n"
    "from _teamrl_sandbox import worker;worker.main(start.pop('config'))"
)
_WORKER_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 5.0
_MINIMAL_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


class SandboxError(RuntimeError):
    """The sandbox machinery itself failed (e.g. a worker could not start)."""


def kill_user_processes(uid: int) -> None:
    """SIGKILL every process of `uid` at once, from a `kill` started as that uid.

    The fallback for a worker that died without a PID namespace: detached processes its program
    started are no longer its descendants, but they still run under the worker's own user id.
    Run as `uid` (never as root), kill(-1) reaches only that user's processes.
    """
    try:
        subprocess.run(
            ["kill", "-KILL", "-1"],
            user=uid,
            group=uid,
            extra_groups=[],
            env=_MINIMAL_ENV,
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        pass  # no `kill` binary, or the id switch failed: nothing was signalled


class WorkerHandle:
    """One worker process and its two pipes.

    proc: the process the pool started. With a PID namespace (isolation["pid_namespace"]) that is
    a thin parent outside the namespace, and `worker_pid` is the worker itself (pid 1 inside).
    """

    def __init__(self, config: dict[str, Any]):
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(_MINIMAL_ENV),
            cwd="/",
            close_fds=True,
            start_new_session=True,  # Ctrl-C in the grader's terminal stays ours
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.in_fd = self.proc.stdin.fileno()
        self.out_fd = self.proc.stdout.fileno()
        try:
            protocol.send_message(self.in_fd, {"package_dir": PACKAGE_DIR, "config": config})
        except OSError:
            pass  # the worker died at once: wait_ready reports it
        self.worker_pid = self.proc.pid
        self.isolation: dict[str, Any] = {}

    def wait_ready(self) -> WorkerHandle:
        """Wait for the worker's start-up report (started workers come up in parallel)."""
        try:
            ready = protocol.recv_message(self.out_fd, time.monotonic() + _WORKER_START_TIMEOUT_S)
        except protocol.ProtocolError as exc:
            self.kill()
            raise SandboxError(f"sandbox worker failed to start: {exc} (its stderr is the grader's)") from None
        self.isolation = ready["isolation"]
        self.worker_pid = int(self.isolation["host_pid"])
        return self

    def request(self, msgs: list[dict[str, Any]], timeout_s: float) -> dict[str, Any]:
        for msg in msgs:
            protocol.send_message(self.in_fd, msg)
        return protocol.recv_message(self.out_fd, time.monotonic() + timeout_s)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout_s: float = 5.0) -> None:
        try:
            protocol.send_message(self.in_fd, {"op": "quit"})
            self.proc.wait(timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> None:
        """Kill the worker and every process its programs started, then close the pipes."""
        if self.proc.poll() is None and self.isolation.get("pid_namespace"):
            # The thin parent kills the worker (the namespace's init: everything in it dies too),
            # reaps it and exits.
            self.proc.terminate()
            try:
                self.proc.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            # The worker dies with its parent (death signal), and the namespace with the worker.
            self.proc.kill()
            self.proc.wait()
        uid = self.isolation.get("sandbox_uid")
        if uid is not None and not self.isolation.get("pid_namespace"):
            kill_user_processes(uid)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
