"""The filesystem programs see: an allow-list, enforced by a new root (kernel) or the guards (fallback).

A program sees its own directory, the Python installation, the system's shared libraries and
executables, a few device nodes, and the paths its sandbox explicitly grants (`grant_paths`);
nothing else: no data sets, no checkout, no home directory, no other program's files, wherever
they are. `visible_paths` computes that list once in the worker; `enter_new_root` makes it the
whole filesystem of the worker's mount namespace (a tmpfs root holding read-only bind mounts,
entered with pivot_root, the old root detached), and guards.py checks the same list in-process
where namespaces are unavailable.

What is on the list, and why:

* the Python installation: the prefix trees (`sys.prefix`, `sys.base_prefix`, `sys.exec_prefix`)
  and the site-packages directories. For a system Python whose prefix is /usr or /usr/local only
  its library directories are listed, not the whole prefix. Entries of `sys.path` outside these
  (e.g. an editable install's source checkout) are not: programs must not read the grader's code.
* /usr/lib, /usr/lib64, /lib, /lib64: the shared libraries that C extension modules load when a
  program imports them (libcrypto for hashlib, libffi, libz, ...) and the dynamic loader.
* /usr/bin, /bin: executables for programs that may start processes (own user id); they hold
  no data, and see the same restricted tree.
* /usr/share/zoneinfo: time-zone data for `zoneinfo` (no secrets in it).
* /etc/ld.so.cache: the loader's index of library locations (without it, libraries outside the
  loader's built-in directories are not found). No other /etc file is needed: the network is off
  (no resolv.conf, hosts, ssl) and the programs' user id has no passwd entry anyway.
* /dev/null, zero, full, random, urandom, and /dev/fd, stdin, stdout, stderr as links into
  /proc/self/fd (programs read `/dev/stdin`).
* /proc, only inside the worker's own PID namespace, where it shows just the worker and its
  programs; without one it would show the grader's processes, so programs get none.
* /tmp: a private tmpfs holding the per-program directories.

Stdlib only: this module is loaded inside the bare worker interpreter.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from typing import Any

from .linux import (
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    mount,
    pivot_root,
    umount_detached,
)

SYSTEM_DIRS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/bin", "/bin", "/usr/share/zoneinfo")
SYSTEM_FILES = ("/etc/ld.so.cache",)
DEVICES = ("null", "zero", "full", "random", "urandom")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}
# Prefixes too broad to list whole: for a Python installed there, only its library dirs are listed.
_SYSTEM_PREFIXES = ("/", "/usr", "/usr/local")
# Where the new root is assembled before pivot_root (any directory would do: the namespace is ours).
BUILD_AT = "/tmp"


def inside(path: str, root: str) -> bool:
    """Whether `path` is `root` or below it (both normalised absolute paths)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def python_paths() -> list[str]:
    """The directories and files of this interpreter's installation that programs need."""
    paths: list[str] = [sys.executable]
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        if os.path.realpath(prefix) in _SYSTEM_PREFIXES:
            scheme = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix, "installed_base": prefix})
            paths += [scheme[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
        else:
            paths.append(prefix)
    paths += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    # A shared libpython outside the prefix trees (e.g. /usr/local/lib): a program that starts
    # `sys.executable` needs it (forked programs have it mapped already).
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if libdir and soname and os.path.isfile(os.path.join(libdir, soname)):
        paths.append(os.path.join(libdir, soname))
    return paths


def visible_paths(grant_paths: list[str]) -> list[str]:
    """Every host path programs may read (those that exist here), in a stable order."""
    result: list[str] = []
    for path in python_paths() + list(SYSTEM_DIRS) + list(SYSTEM_FILES) + list(grant_paths):
        path = os.path.abspath(path)
        if os.path.lexists(path) and path not in result:
            result.append(path)
    return result


def _normalise(path: str) -> str:
    """Absolute, with symlinks resolved in every component but the last."""
    parent, name = os.path.split(os.path.abspath(path))
    return os.path.join(os.path.realpath(parent), name) if name else "/"


def plan(paths: list[str]) -> list[tuple[str, str, str]]:
    """(kind, path, link target) entries that recreate `paths` in a new root.

    kind is "dir" or "file" (bind-mounted from the same host path) or "link" (a symlink such as
    /lib -> usr/lib, recreated as it is; its target is planned too). Entries inside a bound
    directory are dropped: they are visible through it already.
    """
    entries: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    todo = list(paths)
    while todo:
        path = _normalise(todo.pop(0))
        if path in seen or not os.path.lexists(path):
            continue
        seen.add(path)
        if os.path.islink(path):
            target = os.readlink(path)
            entries.append(("link", path, target))
            # One link at a time: a link to a link needs the middle one recreated too.
            todo.append(os.path.join(os.path.dirname(path), target))
        else:
            entries.append(("dir" if os.path.isdir(path) else "file", path, ""))
    dirs = [path for kind, path, _ in entries if kind == "dir"]
    kept = [e for e in entries if not any(inside(e[1], d) and e[1] != d for d in dirs)]
    return sorted(kept, key=lambda e: e[1])


def _mkdirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)
    os.chmod(path, 0o755)  # makedirs applies the umask; programs under another uid must traverse


def _bind(fd: int, target: str, is_dir: bool, flags: int, readonly: bool = True) -> None:
    """Bind the host object open as O_PATH `fd` at `target` (created), read-only unless told."""
    if is_dir:
        _mkdirs(target)
    else:
        _mkdirs(os.path.dirname(target))
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    mount(None, target, None, MS_BIND | MS_REMOUNT | (MS_RDONLY if readonly else 0) | flags)


def _hide(root: str, hide_paths: list[str], null_fd: int) -> list[str]:
    """Cover `hide_paths` that are visible in the new root (inside a bound tree) with emptiness."""
    hidden = []
    for path in hide_paths:
        target = root + path
        if os.path.isdir(target) and not os.path.islink(target):
            mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0755")
        elif os.path.isfile(target) and not os.path.islink(target):
            mount(f"/proc/self/fd/{null_fd}", target, None, MS_BIND)
        else:
            continue
        hidden.append(path)
    return hidden


def enter_new_root(
    entries: list[tuple[str, str, str]], tmpfs_mb: int, hide_paths: list[str], with_proc: bool, mount_flags: Any
) -> dict[str, list[str]]:
    """Make `entries` (see `plan`), /dev, /tmp (and /proc) the whole filesystem; pivot into it.

    mount_flags(path) -> the per-mount flags (nosuid, nodev, ...) of the mount holding `path`,
    which a read-only re-mount must keep in a user namespace. Every host object is opened
    (O_PATH) before the first mount, so that none is shadowed by the new root being built.
    Returns the paths bound and hidden.
    """

    def opened(path: str) -> int:
        return os.open(path, os.O_PATH | (os.O_DIRECTORY if os.path.isdir(path) else 0))

    fds: dict[str, int] = {}
    try:
        for kind, path, _ in entries:
            if kind != "link":
                fds[path] = opened(path)
        devices = {name: opened(f"/dev/{name}") for name in DEVICES if os.path.exists(f"/dev/{name}")}
        fds.update({f"/dev/{name}": fd for name, fd in devices.items()})
        if with_proc:
            fds["/proc"] = opened("/proc")
        root = BUILD_AT
        mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        bound = []
        for kind, path, target in entries:
            if kind == "link":
                _mkdirs(os.path.dirname(root + path))
                os.symlink(target, root + path)
            else:
                _bind(fds[path], root + path, kind == "dir", mount_flags(path))
                bound.append(path)
        for name in devices:
            # Writable: programs write to /dev/null.
            _bind(fds[f"/dev/{name}"], f"{root}/dev/{name}", False, mount_flags(f"/dev/{name}"), readonly=False)
        for name, target in DEV_LINKS.items():
            os.symlink(target, f"{root}/dev/{name}")
        _mkdirs(f"{root}/dev/shm")  # exists but stays unwritable, as before
        if with_proc:
            _bind(fds["/proc"], f"{root}/proc", True, MS_NOSUID | MS_NODEV | MS_NOEXEC)
        _mkdirs(f"{root}/tmp")
        mount("tmpfs", f"{root}/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmpfs_mb}m,mode=0755")
        hidden = _hide(root, hide_paths, devices["null"]) if "null" in devices else []
        mount(None, root, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    finally:
        for fd in fds.values():
            os.close(fd)
    os.chdir(root)
    pivot_root(".", ".")  # the old root ends up stacked on "/", where it is detached from
    umount_detached(".")
    os.chdir("/")
    return {"bound": bound, "hidden": hidden}


def prune_sys_path(visible: list[str]) -> list[str]:
    """Drop `sys.path` entries programs cannot see (e.g. an editable install's checkout); return them.

    They would only fail to import, and their names tell a program where the grader's code is.
    """
    roots = [os.path.realpath(p) for p in visible]
    dropped = [p for p in sys.path if p and not any(inside(os.path.realpath(p), r) for r in roots)]
    sys.path[:] = [p for p in sys.path if p not in dropped]
    for path in dropped:
        sys.path_importer_cache.pop(path, None)
    return dropped
