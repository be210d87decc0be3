"""What runs inside a forked program process, between fork() and os._exit().

`confine` applies the OS-level limits (session, descriptors, rlimits, user id); `prepare_interpreter`
gives the inherited worker interpreter the look of a fresh `python -c` (environment, argv, path,
stdio, __main__) and installs the in-process guards; `execute` runs the source and returns the
exit code a real interpreter would have returned. Nothing here may return into the worker loop:
callers wrap it so that every path ends in os._exit.
"""

from __future__ import annotations

import fcntl
import linecache
import math
import os
import resource
import signal
import stat
import sys
import traceback
import types
from dataclasses import dataclass
from typing import Any

from . import guards, linux, syscall_filter

SETUP_FAILED_EXIT = 250  # exit code when confinement itself failed (reported as sandbox_error)
MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
PROGRAM_FILENAME = "<program>"
# Our own modules, hidden from the program's sys.modules. Listed up front: scanning sys.modules in
# the child would touch (and so copy-on-write) hundreds of pages, which costs about a millisecond.
_OWN_MODULES: list[str] = []


def cpu_limit_s(limits: dict[str, Any]) -> int:
    """The CPU seconds a program gets: `cpu_time_s` rounded up to whole seconds, as RLIMIT_CPU counts."""
    return max(1, math.ceil(limits["cpu_time_s"]))


def remember_own_modules() -> None:
    """Record the sandbox's module names (called once in the worker, before forking)."""
    _OWN_MODULES[:] = [n for n in sys.modules if n.startswith("_teamrl_sandbox")]


def remap_fds(fd_map: dict[int, int]) -> None:
    """Make each target fd a copy of its source fd and close every other descriptor."""
    # Park the sources above every target first, so no dup2 clobbers a source still needed.
    parked = {target: fcntl.fcntl(current, fcntl.F_DUPFD_CLOEXEC, 64) for target, current in fd_map.items()}
    for target, current in parked.items():
        os.dup2(current, target)  # dup2 clears close-on-exec on the target
    start = 0
    for fd in sorted(fd_map) + [1 << 20]:
        if fd > start:
            os.closerange(start, fd)
        start = fd + 1


@dataclass(frozen=True)
class Confinement:
    """What the worker decided at start-up about confining each program process.

    uid: the programs' own user id (None: they keep the worker's); worker_pid: the worker's pid
    (a child whose parent is no longer that pid gives up); user_namespace: the worker runs in an
    unprivileged user namespace, whose capabilities a program must not keep; private_ipc: each
    program gets an IPC namespace of its own (SysV IPC, POSIX message queues); syscall_filter:
    each program installs the seccomp filter of syscall_filter.py.
    """

    uid: int | None
    worker_pid: int
    user_namespace: bool
    private_ipc: bool = False
    syscall_filter: bool = False


def confine(
    fd_map: dict[int, int], workdir: str, limits: dict[str, Any], how: Confinement, new_session: bool = True
) -> None:
    """Process-level confinement; `fd_map` maps target fd -> current fd (all others get closed).

    new_session: start a session and process group of our own (False for a caller that already
    did, such as the test judge).
    """
    uid = how.uid
    if new_session:
        os.setsid()  # own session and process group: the worker kills the whole group afterwards
    remap_fds(fd_map)
    os.chdir(workdir)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = cpu_limit_s(limits)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU at soft, SIGKILL at hard
    memory = limits["memory_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["max_file_bytes"], limits["max_file_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["max_open_files"], limits["max_open_files"]))
    if how.private_ipc:
        # A fresh IPC namespace (while we still have the privilege to make one): SysV segments,
        # semaphores, message queues and POSIX message queues the program makes die with its
        # last process, and nothing an earlier program or the host made is visible.
        linux.unshare(linux.CLONE_NEWIPC)
    if uid is not None:
        # Counted per user id, so it is only meaningful for a user id of our own.
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["max_processes"], limits["max_processes"]))
        for fd in (0, 1, 2):
            # The worker made these pipes (as root, mode 0600): reopening them through /dev/stdin
            # needs them to be ours. Only pipes: never chown a device such as /dev/null.
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.fchown(fd, uid, uid)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root to non-root: all capabilities are dropped too
    elif how.user_namespace:
        linux.drop_capabilities()  # we are "capable" inside the worker's user namespace
    # Set after the id change (which clears it); then make sure the worker did not die meanwhile.
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != how.worker_pid:
        os._exit(SETUP_FAILED_EXIT)
    if how.syscall_filter:
        syscall_filter.install()  # last: the steps above need calls it may refuse


# Built once in the worker (see `ready_interpreter`) so that each child only assigns them: creating
# text streams and rewriting the environment after fork costs ~0.5 ms of copy-on-write faults.
_STDIO: list[Any] = []


def ready_interpreter() -> None:
    """Prepare, in the worker before any fork, what every program shares: environment and stdio."""
    os.environ.clear()
    os.environ.update(
        {
            "PATH": MINIMAL_PATH,
            "LANG": "C.UTF-8",
            # Numeric libraries would otherwise start one thread per core, blowing the process
            # and memory limits before the program does anything.
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
    )
    # The worker never uses these; in a child, fds 0-2 are the program's pipes by the time they are.
    _STDIO[:] = [
        open(0, "r", encoding="utf-8", closefd=False),  # noqa: SIM115
        open(1, "w", encoding="utf-8", closefd=False),  # noqa: SIM115
        open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1),  # noqa: SIM115
    ]


def prepare_interpreter(workdir: str, guard_config: dict[str, Any] | None, source: str) -> dict[str, Any]:
    """Make the interpreter look fresh; return the globals dict the program will run in."""
    if not _STDIO:
        raise RuntimeError("child.ready_interpreter() was not called in the worker")
    os.environ["HOME"] = workdir
    os.environ["TMPDIR"] = workdir
    import tempfile

    tempfile.tempdir = None  # recompute from TMPDIR on first use
    sys.argv = [PROGRAM_FILENAME]
    sys.path.insert(0, workdir)
    for name in _OWN_MODULES:
        sys.modules.pop(name, None)
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
    sys.modules["__main__"] = main
    sys.stdin, sys.stdout, sys.stderr = _STDIO
    # typeshed marks these Final; a fresh interpreter's originals are the program's own pipes, so they are rebound too
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = _STDIO  # type: ignore[misc]
    lines = source.splitlines(keepends=True)
    linecache.cache[PROGRAM_FILENAME] = (len(source), None, lines, PROGRAM_FILENAME)
    if guard_config is not None:
        guards.install(**guard_config)
    return main.__dict__


def _exit_code_of(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the program may have broken stderr
        pass
    return 1


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _print_exception(exc: BaseException) -> None:
    """Print a traceback like `python` would, without the sandbox's own frames (this module's
    exec call, the guards' audit hook)."""
    try:
        report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        report.stack = traceback.StackSummary.from_list(
            [frame for frame in report.stack if not frame.filename.startswith(_PACKAGE_DIR)]
        )
        sys.stderr.write("".join(report.format()))
    except BaseException:  # noqa: BLE001 - e.g. MemoryError while formatting
        try:
            os.write(2, f"\n{type(exc).__name__}\n".encode())
        except OSError:
            pass


def execute(source: str, namespace: dict[str, Any]) -> int:
    """Run `source` as __main__ in `namespace`; return the process exit code."""
    try:
        # dont_inherit: the `from __future__` imports of this module must not leak into the program.
        compiled = compile(source, PROGRAM_FILENAME, "exec", dont_inherit=True)
        exec(compiled, namespace)  # noqa: S102 - running untrusted code is the point; we are confined
        return 0
    except SystemExit as exc:
        return _exit_code_of(exc)
    except BaseException as exc:  # noqa: BLE001 - report any failure like the interpreter does
        _print_exception(exc)
        return 1


def finish(exit_code: int) -> None:
    """Run exit handlers and flush like interpreter shutdown does, then leave via os._exit."""
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()  # join non-daemon threads, as a normal exit would
        import atexit

        atexit._run_exitfuncs()
    except SystemExit as exc:
        exit_code = _exit_code_of(exc)
    except BaseException as exc:  # noqa: BLE001
        _print_exception(exc)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - broken pipe / output limit
            if stream is sys.stdout and exit_code == 0:
                exit_code = 120  # what CPython does when flushing stdout fails at exit
    os._exit(exit_code)


def run_program(
    source: str,
    fd_map: dict[int, int],
    workdir: str,
    limits: dict[str, Any],
    how: Confinement,
    guard_config: dict[str, Any] | None,
) -> None:
    """Entry point in the forked child for a plain program run. Never returns."""
    try:
        confine(fd_map, workdir, limits, how)
        namespace = prepare_interpreter(workdir, guard_config, source)
    except BaseException as exc:  # noqa: BLE001
        try:
            os.write(2, f"teamrl-sandbox: could not confine the program: {exc!r}\n".encode())
        finally:
            os._exit(SETUP_FAILED_EXIT)
    finish(execute(source, namespace))
    os._exit(SETUP_FAILED_EXIT)  # unreachable: finish() exits


__all__ = ["Confinement", "confine", "execute", "finish", "prepare_interpreter", "run_program", "SETUP_FAILED_EXIT"]
