"""In-process guards (a PEP 578 audit hook) for when the kernel-level isolation is not available.

These are the fallback layer: they stop ordinary Python code from opening network sockets,
writing outside its own directory, reading the grader's directories, starting or signalling other
processes, and loading C code through ctypes. An audit hook cannot be removed from Python code,
but it is not a security boundary against a determined attacker with native code; that is why
the worker prefers namespaces and a separate user id and reports which layer is active.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_AF_UNIX = 1  # Linux value; `socket` itself is not imported here to keep the child lean
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

# Events that create processes or reach native code; blocked outright when process creation is off.
_PROCESS_EVENTS = frozenset({
    "os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen", "os.fork",
    "os.forkpty", "pty.spawn", "os.startfile",
})
_NATIVE_EVENTS = frozenset({"ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function", "ctypes.cdata"})
_NATIVE_MODULES = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "cffi", "_cffi_backend"})
_NETWORK_EVENTS = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"})
# Events whose first (and for rename/link also second) argument is a path being modified.
_PATH_WRITE_EVENTS = frozenset({
    "os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime",
    "os.mkfifo", "os.mknod", "os.setxattr", "os.removexattr",
})
_PATH_PAIR_EVENTS = frozenset({"os.rename", "os.link", "shutil.move"})


def _as_path(value: Any) -> str | None:
    """A normalised absolute path, or None for file descriptors / unknown objects."""
    if isinstance(value, int):
        return None
    try:
        value = os.fsdecode(os.fspath(value))
    except TypeError:
        return None
    return os.path.normpath(os.path.join(os.getcwd(), value))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


def install(workdir: str, block_network: bool, restrict_files: bool, block_processes: bool,
            hidden_paths: list[str]) -> None:
    """Install the audit hook for this (forked, single-program) interpreter."""
    workdir = os.path.normpath(workdir)
    hidden = tuple(os.path.normpath(p) for p in hidden_paths)
    my_pid = os.getpid()
    if block_processes:
        for name in _NATIVE_MODULES:
            sys.modules.pop(name, None)  # already-imported modules would skip the import event
        for name in [n for n in sys.modules if n.startswith("ctypes.")]:
            del sys.modules[name]

    def deny(what: str) -> None:
        raise PermissionError(f"teamrl sandbox: {what} is not allowed")

    def check_write(raw: Any) -> None:
        path = _as_path(raw)
        if path is not None and not _inside(path, workdir):
            deny(f"writing {path!r} (outside the program directory)")

    def check_read(raw: Any) -> None:
        path = _as_path(raw)
        if path is None:
            return
        if any(_inside(path, h) for h in hidden):
            deny(f"reading {path!r}")
        if path.startswith("/proc/"):
            part = path.split("/")[2]
            if part.isdigit() and int(part) != my_pid:
                deny(f"reading {path!r} (another process)")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if block_network:
            if event == "socket.__new__":
                if args[1] != _AF_UNIX:  # socketpair() (asyncio, multiprocessing) stays usable
                    deny("creating a network socket")
            elif event in _NETWORK_EVENTS:
                deny(f"{event}")
        if block_processes:
            if event in _PROCESS_EVENTS or event in _NATIVE_EVENTS:
                deny(f"{event}")
            if event == "import" and args[0].split(".")[0] in _NATIVE_MODULES:
                deny(f"importing {args[0]}")
            if event == "os.kill":
                pid = args[0]
                if pid not in (0, my_pid) and not (pid > 0 and os.getpgid(pid) == os.getpgrp()):
                    deny(f"signalling process {pid}")
            elif event == "os.killpg" and args[0] != os.getpgrp():
                deny(f"signalling process group {args[0]}")
        if restrict_files:
            if event == "open":
                path, mode, flags = args[0], args[1], args[2]
                writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                    isinstance(flags, int) and flags & _WRITE_FLAGS)
                if writing:
                    check_write(path)
                check_read(path)
            elif event in _PATH_WRITE_EVENTS:
                check_write(args[0])
            elif event in _PATH_PAIR_EVENTS:
                check_write(args[0])
                check_write(args[1])
            elif event == "os.symlink":
                deny("creating symlinks")
            elif event in ("os.listdir", "os.scandir", "os.chdir"):
                check_read(args[0] if args else ".")

    sys.addaudithook(hook)
