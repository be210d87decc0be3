"""A seccomp filter for program processes: no keyrings, no new namespaces (ctypes; stdlib only).

Two kinds of kernel state outlive a program and are not covered by the worker's namespaces:

* keyrings (`add_key`, `request_key`, `keyctl`): a key added to the user keyring of the
  program's user id stays there for the worker's next program, and the session keyring is the
  one the worker inherited. No namespace separates them, so the calls are refused (EPERM).
* new namespaces (`unshare`, `setns`, and `clone` with a namespace flag): in a user namespace of
  its own a program is "root" again and can make mount namespaces and reach kernel code meant
  for administrators. Refused (EPERM). `clone3` passes its flags in memory, which a seccomp
  filter cannot read, so it fails with ENOSYS and the C library falls back to `clone`, as it
  does on kernels older than 5.3.

Installed by the program process itself after it dropped its privileges (child.confine), so
the worker keeps the calls it needs; the filter is inherited by everything the program starts,
and cannot be removed. Only x86_64 and aarch64 are known here; elsewhere `install` raises.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

from .isolation import libc, try_in_child

# Linux's classic-BPF opcodes (linux/filter.h) and seccomp's return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
# Offsets in struct seccomp_data: the syscall number, the audit architecture, args[0] (its low
# 32 bits on these little-endian machines, which hold every CLONE_NEW* flag).
_NR, _ARCH, _ARG0 = 0, 4, 16

# All CLONE_NEW* flags clone(2) accepts: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

# Per machine: the audit architecture and the numbers of the calls the filter looks at.
_MACHINES = {
    "x86_64": (0xC000003E, {"clone": 56, "add_key": 248, "request_key": 249, "keyctl": 250,
                            "unshare": 272, "setns": 308, "clone3": 435}),
    "aarch64": (0xC00000B7, {"clone": 220, "add_key": 217, "request_key": 218, "keyctl": 219,
                             "unshare": 97, "setns": 268, "clone3": 435}),
}
REFUSED = ("add_key", "request_key", "keyctl", "unshare", "setns")
# x32 system calls arrive on x86_64 with this bit set in the number and the same architecture.
_X32_SYSCALL_BIT = 0x40000000


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def _assemble(lines: list[tuple[int, int | str, int | str, int] | str]) -> list[tuple[int, int, int, int]]:
    """Resolve jump labels: a str line names the next instruction; jt/jf may name a label."""
    labels, index = {}, 0
    for line in lines:
        if isinstance(line, str):
            labels[line] = index
        else:
            index += 1
    code: list[tuple[int, int, int, int]] = []
    for line in lines:
        if isinstance(line, str):
            continue
        op, jt, jf, k = line
        here = len(code) + 1  # jumps count from the next instruction
        code.append((op, labels[jt] - here if isinstance(jt, str) else jt,
                     labels[jf] - here if isinstance(jf, str) else jf, k))
    return code


def program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter for `machine` (default: this one) as (code, jt, jf, k) instructions.

    Raises OSError(ENOSYS) for a machine whose system call numbers are not known here.
    """
    machine = machine or platform.machine()
    if machine not in _MACHINES:
        raise OSError(errno.ENOSYS, f"no seccomp filter known for {machine}")
    arch, numbers = _MACHINES[machine]
    lines: list[tuple[int, int | str, int | str, int] | str] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        # Another calling convention (32-bit int 0x80 on x86_64) numbers the calls differently.
        (_JEQ, 1, 0, arch),
        (_RET, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if machine == "x86_64":
        lines.append((_JGE, "refuse", 0, _X32_SYSCALL_BIT))
    lines += [(_JEQ, "refuse", 0, numbers[name]) for name in REFUSED]
    lines += [
        (_JEQ, "no_clone3", 0, numbers["clone3"]),
        (_JEQ, "clone", 0, numbers["clone"]),
        (_RET, 0, 0, _RET_ALLOW),
        "clone",
        (_LD_W_ABS, 0, 0, _ARG0),
        (_JSET, "refuse", 0, NAMESPACE_FLAGS),
        (_RET, 0, 0, _RET_ALLOW),
        "refuse",
        (_RET, 0, 0, _RET_ERRNO | errno.EPERM),
        "no_clone3",
        (_RET, 0, 0, _RET_ERRNO | errno.ENOSYS),
    ]
    return _assemble(lines)


def install() -> None:
    """Install the filter on this process (needs no_new_privs, which the worker set); raise OSError."""
    code = program()
    instructions = (_Instruction * len(code))(*[_Instruction(*line) for line in code])
    prog = _Program(len(code), instructions)
    ret = libc().prctl(ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER), ctypes.byref(prog),
                       ctypes.c_ulong(0), ctypes.c_ulong(0))
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"installing the seccomp filter: {os.strerror(err)}")


def probe() -> str | None:
    """None when the filter can be installed here and refuses what it should, else why not.

    Tried in a throw-away child: a filter cannot be removed once installed.
    """
    def attempt() -> None:
        install()
        if libc().unshare(ctypes.c_int(0x10000000)) == 0 or ctypes.get_errno() != errno.EPERM:
            raise OSError(errno.EINVAL, "the filter did not refuse unshare(CLONE_NEWUSER)")

    return try_in_child(attempt)
