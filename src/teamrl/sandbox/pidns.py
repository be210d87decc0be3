"""Run the worker as the init process (pid 1) of a PID namespace of its own.

When the init process of a PID namespace dies, for whatever reason, the kernel kills every other
process in that namespace. So once the worker is that init, nothing a program starts can outlive
the worker: not a double-forked, `setsid`-detached daemon, not a fork bomb, not even when the
worker itself is SIGKILLed mid-program by the pool or the grader dies. (Without it, such a daemon
would re-parent to the machine's init when the worker is killed, and live on.)

`enter` leaves the process the pool started behind as a thin parent that only waits for the
worker and exits with its status; the worker gets a parent-death signal from that parent, so
killing the process the pool knows about kills the worker, and with it the namespace (SIGTERM
does it in order: that parent kills and reaps the worker, then exits).

The worker also mounts a fresh /proc for the namespace, so programs see only the namespace's own
processes (not the grader's command lines) and /proc lookups by pid agree with `os.getpid()`.
It is mounted with hidepid=invisible: a process sees only the processes it could ptrace, so a
program sees its own processes, not the worker (root, or holding capabilities in its user
namespace), not the judge of a test run (not dumpable), not another program's.
Stdlib only: this module is loaded inside the bare worker interpreter.
"""

from __future__ import annotations

import errno
import os
import select
import signal

from .linux import (
    CLONE_NEWNS,
    CLONE_NEWPID,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_PDEATHSIG,
    mount,
    prctl,
    try_in_child,
    unshare,
)


# Most private first: "invisible" (Linux 5.8+) hides other processes' /proc entries entirely, the
# older "2" too; the worker needs none of them (it can ptrace its programs), so either will do.
_PROC_OPTIONS = ("hidepid=invisible", "hidepid=2")


def _mount_proc() -> None:
    """A private mount namespace with a /proc that shows this PID namespace (see `_PROC_OPTIONS`)."""
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # never propagate our mounts to the host
    for options in _PROC_OPTIONS:
        try:
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, options)
            return
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # EINVAL: an option this kernel does not know
                raise
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def probe() -> str | None:
    """None when a PID namespace with its own /proc can be made here, else the reason why not.

    Tried in a throw-away child: unshare(CLONE_NEWPID) changes the namespace of the caller's
    *future* children for good (in a user namespace it cannot be undone), so the worker only
    calls it once it knows the whole sequence works.
    """

    def attempt() -> None:
        try:
            unshare(CLONE_NEWPID)
        except OSError as exc:
            raise RuntimeError(f"cannot unshare the PID namespace ({exc})") from None
        init = os.fork()
        if init == 0:
            # The namespace's init, a fork inside try_in_child: what it raises is reported there.
            try:
                _mount_proc()
            except OSError as exc:
                raise RuntimeError(f"cannot mount /proc ({exc})") from None
            os._exit(0)
        _, status = os.waitpid(init, 0)
        os._exit(os.waitstatus_to_exitcode(status))  # init has said why it failed, if it did

    return try_in_child(attempt)


def _stay_behind(worker: int, keep_fd: int) -> None:
    """The parent left outside the namespace: hold no pipes, wait, exit like the worker. Never returns.

    SIGTERM makes it kill the worker, reap it and exit, so that the pool's stop leaves no zombie
    (a SIGKILL instead orphans the dying worker to the machine's init, which must reap it).
    """
    for entry in os.listdir("/proc/self/fd"):
        fd = int(entry)
        if fd > 2 and fd != keep_fd:
            try:
                os.close(fd)
            except OSError:
                pass  # the directory listing's own descriptor
    dead = [False]

    def stop(_signum: int, _frame: object) -> None:
        if not dead[0]:  # until reaped the worker's pid is ours, so this cannot hit another process
            os.kill(worker, signal.SIGKILL)

    signal.signal(signal.SIGTERM, stop)
    os.waitid(os.P_PID, worker, os.WEXITED | os.WNOWAIT)  # dead, not yet reaped (retried on EINTR)
    dead[0] = True
    _, status = os.waitpid(worker, 0)
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


def enter() -> int:
    """Continue as pid 1 of a new PID namespace; return this process's pid as the host sees it.

    Call only after `probe()` returned None. The caller's process stays behind (see
    `_stay_behind`) and never returns from here.
    """
    alive_r, alive_w = os.pipe()  # closes (EOF) when the parent left behind dies
    unshare(CLONE_NEWPID)
    pid = os.fork()
    if pid != 0:
        os.close(alive_r)
        _stay_behind(pid, alive_w)
    os.close(alive_w)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # getppid() is 0 here (the parent is outside the namespace): check the pipe instead, in case
    # the parent was killed before the death signal was armed.
    if select.select([alive_r], [], [], 0)[0]:
        os._exit(1)
    os.close(alive_r)
    host_pid = int(os.readlink("/proc/self"))  # still the host's /proc
    _mount_proc()
    return host_pid
