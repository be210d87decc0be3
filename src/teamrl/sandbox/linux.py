"""The Linux system-call layer of the sandbox: the C library, system call numbers, flags (ctypes).

The bottom of the package: it imports nothing of the sandbox, and everything that talks to the
kernel directly (isolation.py, pidns.py, rootfs.py, syscall_filter.py, child.py) imports it.
Stdlib only: this module is loaded inside the bare worker interpreter.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from collections.abc import Callable
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
# Every CLONE_NEW* flag clone(2) accepts.
NAMESPACE_FLAGS = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

# Per machine: the seccomp audit architecture (machines with a filter) and the kernel's numbers of the system calls the
# sandbox makes itself (pivot_root) or filters (syscall_filter.py). x86_64: the kernel's
# arch/x86/entry/syscalls/syscall_64.tbl; aarch64 uses the generic table (asm-generic/unistd.h).
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "execve": 59,
        "clone": 56,
        "pivot_root": 155,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "unshare": 272,
        "perf_event_open": 298,
        "setns": 308,
        "memfd_create": 319,
        "bpf": 321,
        "execveat": 322,
        "userfaultfd": 323,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "clone3": 435,
    },
    "aarch64": {
        "execve": 221,
        "clone": 220,
        "pivot_root": 41,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "unshare": 97,
        "perf_event_open": 241,
        "setns": 268,
        "memfd_create": 279,
        "bpf": 280,
        "execveat": 281,
        "userfaultfd": 282,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "clone3": 435,
    },
    # Machines without a seccomp filter here: only what the worker calls itself.
    "riscv64": {"pivot_root": 41},
    "ppc64le": {"pivot_root": 203},
    "s390x": {"pivot_root": 217},
}

_libc: Any = None


def libc() -> Any:
    """The C library, loaded once, with errno support."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def syscall_number(name: str, machine: str | None = None) -> int:
    """The number of system call `name` on `machine` (default: this one); OSError(ENOSYS) if unknown."""
    machine = machine or platform.machine()
    number = SYSCALLS.get(machine, {}).get(name)
    if number is None:
        raise OSError(errno.ENOSYS, f"{name}: no system call number known for {machine}")
    return number


def check(ret: int, what: str) -> None:
    """Raise OSError (with errno's message) when a libc call returned non-zero."""
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def prctl(option: int, arg2: int = 0) -> None:
    """Call prctl(2) with one argument; raise OSError on failure."""
    check(
        libc().prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)),
        f"prctl({option})",
    )


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Clear every capability of this process (effective, permitted, inheritable)."""
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (_CapData * 2)()
    check(libc().capset(ctypes.byref(header), data), "capset")


def unshare(flags: int) -> None:
    """Call unshare(2); raise OSError on failure."""
    check(libc().unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """Call mount(2); raise OSError on failure."""
    enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    check(libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    """Call pivot_root(2) (glibc has no wrapper); raise OSError on failure."""
    number = syscall_number("pivot_root")
    check(libc().syscall(ctypes.c_long(number), os.fsencode(new_root), os.fsencode(put_old)), "pivot_root")


def umount_detached(target: str) -> None:
    """Lazily unmount `target` and everything below it (umount2 with MNT_DETACH)."""
    check(libc().umount2(os.fsencode(target), ctypes.c_int(MNT_DETACH)), f"umount {target}")


def try_in_child(attempt: Callable[[], None]) -> str | None:
    """Run `attempt` in a forked child; None when it returned, else what it raised.

    For probing steps that cannot be undone in the caller (entering a namespace, a filter).
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            attempt()
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001 - report whatever failed
            os.write(write_end, str(exc).encode()[:500])
            os._exit(1)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as fh:
        why = fh.read().decode("utf-8", "replace")
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return why or f"the probe exited with status {status}"
