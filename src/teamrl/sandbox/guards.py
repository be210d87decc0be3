"""In-process guards (a PEP 578 audit hook) for when the kernel-level isolation is not available.

These are the fallback layer: they stop ordinary Python code from opening network sockets,
writing outside its own directory, reading anything but the allow-list that the new root holds
elsewhere (rootfs.py: its own directory, the Python installation, system libraries, granted
paths), starting or signalling other processes, and loading C code through ctypes.

An audit hook sees opens, directory listings and chdir, but no stat: `os.stat`, `os.lstat`,
`os.access`, `os.readlink` and `os.statvfs` (in `os` and `posix`, which the import system uses)
are therefore replaced by checking wrappers, and `dir_fd` arguments are refused (the hook cannot
see which directory a relative path would then be resolved in). An audit hook cannot be removed from Python code,
but it is not a security boundary against a determined attacker with native code; that is why
the worker prefers namespaces and a separate user id and reports which layer is active.
"""

from __future__ import annotations

import errno
import os
import posix
import stat
import sys
from collections.abc import Sequence
from typing import Any

_AF_UNIX = 1  # Linux value; `socket` itself is not imported here to keep the child lean
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

# Events that create processes or reach native code; blocked outright when process creation is off.
_PROCESS_EVENTS = frozenset(
    {
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.system",
        "subprocess.Popen",
        "os.fork",
        "os.forkpty",
        "pty.spawn",
        "os.startfile",
    }
)
_NATIVE_EVENTS = frozenset({"ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function", "ctypes.cdata"})
_NATIVE_MODULES = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "cffi", "_cffi_backend"})
# C modules that create named objects in /dev/shm (POSIX shared memory, named semaphores) with no
# audit event: without the new root that is the host's /dev/shm, where they would outlive the
# program and be read by the next one.
_SHARED_MEMORY_MODULES = frozenset({"_posixshmem", "_multiprocessing"})
_NETWORK_EVENTS = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"})
# Events whose first (and for rename/link also second) argument is a path being modified.
_PATH_WRITE_EVENTS = frozenset(
    {
        "os.remove",
        "os.rmdir",
        "os.mkdir",
        "os.chmod",
        "os.chown",
        "os.truncate",
        "os.utime",
        "os.mkfifo",
        "os.mknod",
        "os.setxattr",
        "os.removexattr",
    }
)
_PATH_PAIR_EVENTS = frozenset({"os.rename", "os.link", "shutil.move"})
# Events whose last argument (last two for the pairs) is a dir_fd, -1 when none was given.
_DIR_FD_EVENTS = frozenset({"os.mkdir", "os.rmdir", "os.remove", "os.chmod", "os.chown", "os.utime"})
# What reaches the originals the stat wrappers close over.
_INTROSPECTION_EVENTS = frozenset({"gc.get_referrers", "gc.get_referents", "gc.get_objects"})
_STAT_FUNCTIONS = ("stat", "lstat", "access", "readlink", "statvfs")
# Device nodes every program may use (as in the new root, see rootfs.py).
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def _as_path(value: Any) -> str | None:
    """An absolute path (not normalised: ".." must be taken after symlinks, as the kernel does),
    or None for file descriptors / unknown objects."""
    if isinstance(value, int):
        return None
    try:
        value = os.fsdecode(os.fspath(value))
    except TypeError:
        return None
    return os.path.join(os.getcwd(), value)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def make_resolver(lstat: Any, readlink: Any) -> Any:
    """Resolve a path like the kernel does (symlinks followed, ".." after them; missing parts
    taken literally), with the given lstat/readlink so that it does not call the wrapped ones.

    Each step (resolved directory + one name) is cached: a confined program cannot create
    symlinks (os.symlink is refused), so how an existing name resolves cannot change under it;
    /proc, whose fd links do change, is never cached.
    """
    steps: dict[str, str] = {}

    def step(base: str, name: str, depth: int) -> str:
        candidate = f"{base.rstrip('/')}/{name}"
        hit = steps.get(candidate)
        if hit is not None:
            return hit
        result = candidate
        try:
            is_link = stat.S_ISLNK(lstat(candidate).st_mode)
        except (OSError, ValueError):
            is_link = False
        if is_link and depth < 40:
            target = readlink(candidate)
            result = walk("/" if target.startswith("/") else base, target, depth + 1)
        if len(steps) < 16384 and not candidate.startswith("/proc/"):
            steps[candidate] = result
        return result

    def walk(base: str, relative: str, depth: int) -> str:
        current = base
        for name in relative.split("/"):
            if name in ("", "."):
                continue
            current = os.path.dirname(current) if name == ".." else step(current, name, depth)
        return current

    return lambda path: walk("/", path, 0)


def _not_visible(path: str) -> OSError:
    # What the new root answers for a path that is not in it (see rootfs.py): no such file.
    return FileNotFoundError(errno.ENOENT, "No such file or directory (not visible in the teamrl sandbox)", path)


def _ancestors(path: str) -> set[str]:
    found = set()
    while path not in ("/", ""):
        path = os.path.dirname(path)
        found.add(path)
    return found


class AllowList:
    """Which paths a program may read (and stat) in the fallback layer."""

    def __init__(self, read_roots: list[str], hidden: list[str], resolve: Any):
        self.resolve = resolve
        self.roots = tuple(dict.fromkeys(resolve(os.path.abspath(p)) for p in read_roots))
        self.hidden = tuple(resolve(os.path.abspath(p)) for p in hidden)
        # Ancestors of what is visible exist in the new root too: stat on them tells nothing.
        self.ancestors = frozenset().union(*(_ancestors(r) for r in self.roots))

    def extended(self, read_roots: list[str]) -> AllowList:
        """This list plus `read_roots` (sharing the resolver and its cache)."""
        more = AllowList(read_roots, [], self.resolve)
        more.roots = (*self.roots, *more.roots)
        more.hidden = self.hidden
        more.ancestors = self.ancestors | more.ancestors
        return more

    def readable(self, path: str) -> bool:
        """Whether the program may open or list `path` (absolute)."""
        real = self.resolve(path)
        if any(_inside(real, h) for h in self.hidden):
            return False
        return any(_inside(real, r) for r in self.roots)

    def statable(self, path: str) -> bool:
        """Whether the program may stat `path`: what it may read, and the directories above."""
        return self.readable(path) or self.resolve(path) in self.ancestors


def _wrap_stat(original: Any, allowed: AllowList, deny: Any) -> Any:
    def wrapper(path: Any, *args: Any, dir_fd: Any = None, **kwargs: Any) -> Any:
        if dir_fd is not None:
            deny(f"dir_fd with {original.__name__}")
        where = _as_path(path)
        if where is not None and not allowed.statable(where):
            raise _not_visible(os.fsdecode(os.fspath(path)))
        return original(path, *args, **kwargs)

    wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = original.__name__, original.__name__, original.__doc__
    return wrapper


def _guard_stat_functions(allowed: AllowList, deny: Any) -> None:
    """Replace os/posix stat-like functions by wrappers that check `allowed` and refuse dir_fd."""
    for name in _STAT_FUNCTIONS:
        original = getattr(posix, name, None)
        if original is not None:
            wrapper = _wrap_stat(original, allowed, deny)
            setattr(posix, name, wrapper)
            setattr(os, name, wrapper)
    posix_open = posix.open

    def open_without_dir_fd(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
        if dir_fd is not None:
            deny("dir_fd with open")
        return posix_open(path, flags, mode)  # the "open" audit event checks the path

    open_without_dir_fd.__name__, open_without_dir_fd.__doc__ = "open", posix_open.__doc__
    posix.open = os.open = open_without_dir_fd


_PREPARED: dict[tuple[tuple[str, ...], tuple[str, ...]], AllowList] = {}


def prepare(read_roots: Sequence[str], hidden_paths: list[str]) -> AllowList:
    """The allow-list shared by every program of a worker (called once there before forking, so
    that each program starts with the roots resolved and the resolver's cache warm)."""
    key = (tuple(read_roots), tuple(hidden_paths))
    if key not in _PREPARED:
        resolver = make_resolver(posix.lstat, posix.readlink)
        _PREPARED[key] = AllowList([*read_roots, *_DEVICES], hidden_paths, resolver)
    return _PREPARED[key]


def install(
    workdir: str,
    block_network: bool,
    restrict_files: bool,
    block_processes: bool,
    hidden_paths: list[str],
    read_roots: Sequence[str] = (),
    block_host_shm: bool = False,
) -> None:
    """Install the audit hook for this (forked, single-program) interpreter.

    read_roots: what the program may read besides its own directory, the device nodes and its
    own /proc entry (rootfs.visible_paths); hidden_paths are refused even inside them.
    block_host_shm: refuse the modules that make objects in /dev/shm (set when that is the host's).
    """
    workdir = os.path.abspath(workdir)
    my_pid = os.getpid()
    allowed = None
    if restrict_files:
        allowed = prepare(read_roots, hidden_paths).extended([workdir, f"/proc/{my_pid}"])
        workdir = allowed.resolve(workdir)
    refused_modules = (_NATIVE_MODULES if block_processes else frozenset()) | (
        _SHARED_MEMORY_MODULES if block_host_shm else frozenset()
    )
    for name in refused_modules:
        sys.modules.pop(name, None)  # already-imported modules would skip the import event
    if block_processes:
        for name in [n for n in sys.modules if n.startswith("ctypes.")]:
            del sys.modules[name]

    def deny(what: str) -> None:
        raise PermissionError(f"teamrl sandbox: {what} is not allowed")

    def check_write(raw: Any) -> None:
        path = _as_path(raw)
        if path is not None and allowed is not None and not _inside(allowed.resolve(path), workdir):
            deny(f"writing {os.path.normpath(path)!r} (outside the program directory)")

    def check_read(raw: Any) -> None:
        path = _as_path("." if raw is None else raw)
        if path is not None and allowed is not None and not allowed.readable(path):
            raise _not_visible(path)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "import" and args[0].split(".")[0] in refused_modules:
            deny(f"importing {args[0]}")
        if block_network:
            if event == "socket.__new__":
                if args[1] != _AF_UNIX:  # socketpair() (asyncio, multiprocessing) stays usable
                    deny("creating a network socket")
            elif event in _NETWORK_EVENTS:
                deny(f"{event}")
        if block_processes:
            if event in _PROCESS_EVENTS or event in _NATIVE_EVENTS:
                deny(f"{event}")
            if event == "os.kill":
                pid = args[0]
                if pid not in (0, my_pid) and not (pid > 0 and os.getpgid(pid) == os.getpgrp()):
                    deny(f"signalling process {pid}")
            elif event == "os.killpg" and args[0] != os.getpgrp():
                deny(f"signalling process group {args[0]}")
        if restrict_files:
            _check_file_event(event, args, check_read, check_write, deny)

    if allowed is not None:
        _guard_stat_functions(allowed, deny)
    sys.addaudithook(hook)


def _check_file_event(event: str, args: tuple[Any, ...], check_read: Any, check_write: Any, deny: Any) -> None:
    """The file-system part of the audit hook."""
    if event == "open":
        path, mode, flags = args[0], args[1], args[2]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writing:
            check_write(path)
        check_read(path)
    elif event in _PATH_WRITE_EVENTS:
        if event in _DIR_FD_EVENTS and args[-1] != -1:
            deny(f"dir_fd with {event}")
        check_write(args[0])
    elif event in _PATH_PAIR_EVENTS:
        if event != "shutil.move" and (args[2] != -1 or args[3] != -1):
            deny(f"dir_fd with {event}")
        check_write(args[0])
        check_write(args[1])
    elif event == "os.symlink":
        deny("creating symlinks")
    elif event in ("os.listdir", "os.scandir", "os.chdir", "os.getxattr", "os.listxattr"):
        check_read(args[0] if args else None)
    elif event == "sqlite3.connect":
        database = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes)) else ""
        if database.startswith("file:"):
            deny("sqlite URIs")
        if database and database != ":memory:":
            check_read(database)
    elif event in _INTROSPECTION_EVENTS:
        deny(f"{event}")
