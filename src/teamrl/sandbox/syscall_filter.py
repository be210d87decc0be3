"""A seccomp filter for program processes: system calls no program needs are refused (ctypes; stdlib only).

Refused with EPERM (docs/verifiers/sandbox.md has the table):

* keyrings (`add_key`, `request_key`, `keyctl`): a key added to the user keyring of the
  program's user id stays there for the worker's next program, and the session keyring is the
  one the worker inherited. No namespace separates them.
* new namespaces (`unshare`, `setns`, and `clone` with a namespace flag): in a user namespace of
  its own a program is "root" again and can make mount namespaces and reach kernel code meant
  for administrators. `clone3` passes its flags in memory, which a seccomp filter cannot read,
  so it fails with ENOSYS and the C library falls back to `clone`, as it does on kernels older
  than 5.3.
* io_uring (`io_uring_setup`, `io_uring_enter`, `io_uring_register`): its requests (open, read,
  connect, ...) are carried out by the kernel without passing through this filter again, and it
  has been a steady source of kernel privilege escalations.
* `userfaultfd`: lets a program stall the kernel at a page fault of its choosing, the usual
  tool for winning kernel races.
* `perf_event_open`: hardware counters and kernel sampling; side channels on other processes
  of the machine, and a large kernel surface.
* `bpf`: loads programs into the kernel.
* `memfd_create` and `execveat`: running a binary that exists only in memory (a memfd, started
  through `execveat` or `execve("/proc/self/fd/N")`). A filter cannot see the path `execve`
  is given, so the memory file itself is refused; `execveat` (only needed to run a descriptor)
  goes too.

Installed by the program process itself after it dropped its privileges (child.confine), so
the worker keeps the calls it needs; the filter is inherited by everything the program starts,
and cannot be removed. Only x86_64 and aarch64 are known here; elsewhere `install` raises.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

from .linux import AUDIT_ARCH, NAMESPACE_FLAGS, PR_SET_SECCOMP, SYSCALLS, libc, try_in_child

# Linux's classic-BPF opcodes (linux/filter.h) and seccomp's return values (linux/seccomp.h).
LD_W_ABS = 0x20
JEQ = 0x15
JGE = 0x35
JSET = 0x45
RET = 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000
_SECCOMP_MODE_FILTER = 2
# Offsets in struct seccomp_data: the syscall number, the audit architecture, args[0] (its low
# 32 bits on these little-endian machines, which hold every CLONE_NEW* flag).
NR_OFFSET, ARCH_OFFSET, ARG0_OFFSET = 0, 4, 16

# Refused outright with EPERM, whatever their arguments (why: the module docstring).
REFUSED = (
    "add_key",
    "request_key",
    "keyctl",
    "unshare",
    "setns",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "perf_event_open",
    "bpf",
    "memfd_create",
    "execveat",
)
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
        code.append(
            (op, labels[jt] - here if isinstance(jt, str) else jt, labels[jf] - here if isinstance(jf, str) else jf, k)
        )
    return code


def program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter for `machine` (default: this one) as (code, jt, jf, k) instructions.

    Raises OSError(ENOSYS) for a machine whose system call numbers are not known here.
    """
    machine = machine or platform.machine()
    if machine not in AUDIT_ARCH:
        raise OSError(errno.ENOSYS, f"no seccomp filter known for {machine}")
    arch, numbers = AUDIT_ARCH[machine], SYSCALLS[machine]
    lines: list[tuple[int, int | str, int | str, int] | str] = [
        (LD_W_ABS, 0, 0, ARCH_OFFSET),
        # Another calling convention (32-bit int 0x80 on x86_64) numbers the calls differently.
        (JEQ, 1, 0, arch),
        (RET, 0, 0, RET_KILL_PROCESS),
        (LD_W_ABS, 0, 0, NR_OFFSET),
    ]
    if machine == "x86_64":
        lines.append((JGE, "refuse", 0, _X32_SYSCALL_BIT))
    lines += [(JEQ, "refuse", 0, numbers[name]) for name in REFUSED]
    lines += [
        (JEQ, "no_clone3", 0, numbers["clone3"]),
        (JEQ, "clone", 0, numbers["clone"]),
        (RET, 0, 0, RET_ALLOW),
        "clone",
        (LD_W_ABS, 0, 0, ARG0_OFFSET),
        (JSET, "refuse", 0, NAMESPACE_FLAGS),
        (RET, 0, 0, RET_ALLOW),
        "refuse",
        (RET, 0, 0, RET_ERRNO | errno.EPERM),
        "no_clone3",
        (RET, 0, 0, RET_ERRNO | errno.ENOSYS),
    ]
    return _assemble(lines)


def install() -> None:
    """Install the filter on this process (needs no_new_privs, which the worker set); raise OSError."""
    code = program()
    instructions = (_Instruction * len(code))(*[_Instruction(*line) for line in code])
    prog = _Program(len(code), instructions)
    ret = libc().prctl(
        ctypes.c_int(PR_SET_SECCOMP),
        ctypes.c_ulong(_SECCOMP_MODE_FILTER),
        ctypes.byref(prog),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )
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
