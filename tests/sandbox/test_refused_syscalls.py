"""Kernel interfaces no program needs: io_uring, userfaultfd, perf events, bpf, running a memory file.

Each is refused by the programs' seccomp filter (syscall_filter.py), checked two ways: the
filter program itself, run by a small classic-BPF interpreter here on the kernel's own numbers
(so a call the kernel happens to refuse on this machine anyway, such as unprivileged `bpf`,
still has to be refused by the filter), and hostile programs that make the calls inside.
"""

from __future__ import annotations

import errno
import struct
import textwrap

import pytest
from sandbox_test_helpers import FAST_LIMITS

from teamrl.sandbox import Sandbox
from teamrl.sandbox.syscall_filter import program

# The kernel's numbers (x86_64: arch/x86/entry/syscalls/syscall_64.tbl; aarch64:
# include/uapi/asm-generic/unistd.h), written out here rather than taken from the package.
KERNEL_NUMBERS = {
    "x86_64": {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "userfaultfd": 323,
               "perf_event_open": 298, "bpf": 321, "memfd_create": 319, "execveat": 322},
    "aarch64": {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "userfaultfd": 282,
                "perf_event_open": 241, "bpf": 280, "memfd_create": 279, "execveat": 281},
}
# Calls programs use all the time, which must stay allowed: read, write, openat, mmap, execve.
ALLOWED = {"x86_64": {"read": 0, "write": 1, "openat": 257, "mmap": 9, "execve": 59},
           "aarch64": {"read": 63, "write": 64, "openat": 56, "mmap": 222, "execve": 221}}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def run_filter(code: list[tuple[int, int, int, int]], nr: int, arch: int, arg0: int = 0) -> int:
    """What the seccomp filter `code` returns for system call `nr` (the subset of classic BPF it uses)."""
    data = struct.pack("<iIQQ", nr, arch, 0, arg0)
    acc, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        pc += 1
        if op == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = struct.unpack_from("<I", data, k)[0]
        elif op == 0x15:  # JEQ
            pc += jt if acc == k else jf
        elif op == 0x35:  # JGE
            pc += jt if acc >= k else jf
        elif op == 0x45:  # JSET
            pc += jt if acc & k else jf
        elif op == 0x06:  # RET
            return k
        else:
            raise AssertionError(f"instruction {op:#x} not known to this interpreter")


@pytest.mark.parametrize("machine", sorted(KERNEL_NUMBERS))
@pytest.mark.parametrize("name", sorted(KERNEL_NUMBERS["x86_64"]))
def test_the_filter_refuses_the_call(machine, name):
    code = program(machine)
    assert run_filter(code, KERNEL_NUMBERS[machine][name], AUDIT_ARCH[machine]) == 0x00050000 | errno.EPERM


@pytest.mark.parametrize("machine", sorted(ALLOWED))
def test_the_filter_lets_everyday_calls_through(machine):
    code = program(machine)
    for name, nr in ALLOWED[machine].items():
        assert run_filter(code, nr, AUDIT_ARCH[machine]) == 0x7FFF0000, name


# Each probe prints the errno the call failed with (0: it succeeded, which must not happen).
_PRELUDE = textwrap.dedent("""
    import ctypes, os, platform, subprocess
    libc = ctypes.CDLL(None, use_errno=True)
    NR = {numbers!r}[platform.machine()]

    def call(name, *args):
        args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
        ret = libc.syscall(ctypes.c_long(NR[name]), *args)
        print(0 if ret >= 0 else ctypes.get_errno())
""").format(numbers=KERNEL_NUMBERS)

PROBES = {
    "io_uring_setup": "call('io_uring_setup', 4, ctypes.create_string_buffer(120))",
    "io_uring_enter": "call('io_uring_enter', 0, 0, 0, 0, 0, 0)",  # fd 0 is no ring: EBADF/EOPNOTSUPP unfiltered
    "io_uring_register": "call('io_uring_register', 0, 0, 0, 0)",
    "userfaultfd": "call('userfaultfd', 1)",  # UFFD_USER_MODE_ONLY: allowed unprivileged by the kernel
    # A software clock counting this process's user time: allowed unprivileged (perf_event_paranoid <= 2).
    "perf_event_open": textwrap.dedent("""
        attr = (ctypes.c_uint64 * 16)()
        attr[0] = 1 | (128 << 32)  # type PERF_TYPE_SOFTWARE, size 128
        attr[1] = 1                # PERF_COUNT_SW_TASK_CLOCK
        attr[5] = (1 << 5) | (1 << 6)  # exclude_kernel, exclude_hv
        call('perf_event_open', attr, 0, -1, -1, 0)
    """),
    "bpf": textwrap.dedent("""
        attr = (ctypes.c_uint32 * 18)(2, 4, 4, 1)  # BPF_MAP_TYPE_ARRAY, 4-byte keys and values, 1 entry
        call('bpf', 0, attr, 72)
    """),
    # The whole attack: copy a binary into memory and run it from there.
    "memfd_exec": textwrap.dedent("""
        try:
            fd = os.memfd_create('payload', 0)
        except OSError as exc:
            print(exc.errno)
        else:
            os.write(fd, open('/usr/bin/true', 'rb').read())
            print(subprocess.run([f'/proc/self/fd/{fd}'], pass_fds=(fd,)).returncode or 0)
    """),
    "execveat": textwrap.dedent("""
        pid = os.fork()
        if pid == 0:
            try:
                os.execve(os.open('/usr/bin/true', os.O_RDONLY), ['true'], {})  # fexecve: execveat
            except OSError as exc:
                os._exit(exc.errno)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """),
}


@pytest.fixture(scope="module")
def box():
    with Sandbox(FAST_LIMITS, workers=1) as sandbox:
        if sandbox.isolation["sandbox_uid"] is None or not sandbox.isolation["syscall_filter"]:
            pytest.skip("needs root and seccomp (ctypes and forking are blocked in the other layers)")
        yield sandbox


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_a_program_is_refused_the_call(box, probe):
    res = box.run(_PRELUDE + PROBES[probe])
    assert (res.status, res.stdout) == ("ok", f"{errno.EPERM}\n"), res


def test_programs_still_start_binaries(box):
    res = box.run("import subprocess\nprint(subprocess.run(['true']).returncode)")
    assert (res.status, res.stdout) == ("ok", "0\n"), res
