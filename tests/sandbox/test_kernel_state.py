"""Nothing a judged program leaves in kernel-global stores reaches the next run, or the host.

An outside attack found that the sandbox shared the host's IPC namespace and keyrings: a model's
"unit test" counted its own runs in a SysV semaphore and passed only the first two (the
reference's), so it failed every wrong program and earned the tester +1.1 on 7 of 8 problems.
Stores: SysV shared memory, semaphores and message queues, POSIX message queues and shared
memory, and the user keyring (see kernel_stores.py); and new user or mount namespaces, from
which a program could reach more of the kernel.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import random

import pytest
from kernel_stores import STORES, counter_source

from teamrl.sandbox import Sandbox, SandboxLimits
from teamrl.workflows.code_runner import CodeRunner

LIMITS = SandboxLimits(cpu_time_s=2.0, memory_mb=256)
# What a run sees, every time, once the store is private to it (or refused).
FRESH = {"sysv_shm": "1\n", "sysv_sem": "1\n", "sysv_msg": "1\n", "mqueue": "1\n"}
_SYSV_GET = {"sysv_shm": "shmget", "sysv_sem": "semget", "sysv_msg": "msgget"}
_SYSV_REMOVE = {"sysv_shm": "shmctl", "sysv_sem": "semctl", "sysv_msg": "msgctl"}
_IPC_RMID = 0
_libc = ctypes.CDLL(None, use_errno=True)


def _names() -> tuple[int, str]:
    """A SysV key and a name no earlier test run used."""
    key = random.SystemRandom().randint(10**8, 2**31 - 1)
    return key, f"teamrl-test-{key}"


def _host_has(store: str, key: int, name: str) -> bool:
    """Whether the host (this process's namespaces) holds the object the program made."""
    if store in _SYSV_GET:
        return getattr(_libc, _SYSV_GET[store])(key, 0, 0) != -1
    if store == "mqueue":
        queue = _libc.mq_open(f"/{name}".encode(), os.O_RDONLY)
        if queue != -1:
            _libc.mq_close(queue)
        return queue != -1
    if store == "posix_shm":
        return os.path.exists(f"/dev/shm/{name}")
    raise ValueError(store)


def _remove_from_host(store: str, key: int, name: str) -> None:
    """Clean up what a run of the unfixed sandbox left on the host."""
    if store in _SYSV_GET:
        ident = getattr(_libc, _SYSV_GET[store])(key, 0, 0)
        if ident != -1:
            getattr(_libc, _SYSV_REMOVE[store])(ident, 0, _IPC_RMID) if store == "sysv_sem" else \
                getattr(_libc, _SYSV_REMOVE[store])(ident, _IPC_RMID, None)
    elif store == "mqueue":
        _libc.mq_unlink(f"/{name}".encode())
    elif store == "posix_shm" and os.path.exists(f"/dev/shm/{name}"):
        os.unlink(f"/dev/shm/{name}")


@pytest.fixture(scope="module")
def box():
    with Sandbox(LIMITS, workers=1) as sandbox:
        if sandbox.isolation["sandbox_uid"] is None or sandbox.isolation["filesystem"] != "allowlist-root":
            pytest.skip("needs root (programs under their own user id in the new root, where ctypes is allowed)")
        yield sandbox


# /dev/shm is not in the new root (see docs/verifiers/sandbox.md), so POSIX shared memory is
# tested where the host's is reachable: the audit-hook layer, below.
@pytest.mark.parametrize("store", [s for s in STORES if s != "posix_shm"])
def test_a_run_leaves_nothing_the_next_run_can_read(box, store):
    key, name = _names()
    program = counter_source(store, key, name) + "print(bump())\n"
    try:
        first, second = box.run(program), box.run(program)
    finally:
        _remove_from_host(store, key, name)
    # The second run (same worker, same user id) sees exactly what the first saw.
    assert (second.status, second.stdout) == (first.status, first.stdout), (first, second)
    if store in FRESH:  # still usable within a run: a namespace of its own, not a refusal
        assert (first.status, first.stdout) == ("ok", FRESH[store]), first
    else:
        assert first.status == "error" and ("OSError" in first.stderr or "Error" in first.stderr), first


def test_posix_shared_memory_does_not_persist_without_the_new_root():
    key, name = _names()
    program = counter_source("posix_shm", key, name) + "print(bump())\n"
    try:
        with Sandbox(LIMITS, workers=1, os_isolation=False) as sandbox:
            first, second = sandbox.run(program), sandbox.run(program)
        leaked = _host_has("posix_shm", key, name)
    finally:
        _remove_from_host("posix_shm", key, name)
    assert not leaked
    assert (second.status, second.stdout) == (first.status, first.stdout), (first, second)
    assert first.status == "error" and "importing _posixshmem is not allowed" in first.stderr, first


@pytest.mark.parametrize("store", ["sysv_shm", "sysv_sem", "sysv_msg", "mqueue"])
def test_what_a_program_creates_never_reaches_the_host(store):
    key, name = _names()
    try:
        with Sandbox(LIMITS, workers=1) as sandbox:
            res = sandbox.run(counter_source(store, key, name) + "print(bump())\n")
            while_open = _host_has(store, key, name)
        after_close = _host_has(store, key, name)
    finally:
        _remove_from_host(store, key, name)
    if sandbox.isolation["sandbox_uid"] is None:
        pytest.skip("needs root (ctypes is blocked in the other layers)")
    assert res.stdout == "1\n", res
    assert not while_open and not after_close


def test_a_host_segment_is_invisible_inside(box):
    key, _ = _names()
    segment = _libc.shmget(key, 4096, 0o1644)  # IPC_CREAT, readable by everybody
    assert segment != -1, os.strerror(ctypes.get_errno())
    try:
        res = box.run(counter_source("sysv_shm", key, "") + "print(libc.shmget(KEY, 0, 0), ctypes.get_errno())\n")
    finally:
        _libc.shmctl(segment, _IPC_RMID, None)
    assert res.stdout.split() == ["-1", str(errno.ENOENT)], res


_CLONE = {"x86_64": 56, "aarch64": 220}
_PROBE_PRELUDE = """
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUSER, SIGCHLD = 0x00020000, 0x10000000, 17
"""
# Each probe prints 0 when it got the namespace(s), else the errno.
NAMESPACE_PROBES = {
    "unshare-user": "print(0 if libc.unshare(CLONE_NEWUSER) == 0 else ctypes.get_errno())",
    "unshare-user-and-mount": "print(0 if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 else ctypes.get_errno())",
    "clone-user": f"""
pid = libc.syscall({_CLONE.get(platform.machine(), -1)}, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
if pid == 0:
    os._exit(0)
errno_of_clone = 0 if pid > 0 and os.waitpid(pid, 0) else ctypes.get_errno()
import threading  # plain threads still start (the C library falls back from clone3 to clone)
worker = threading.Thread(target=sum, args=(range(10),))
worker.start()
worker.join()
print(errno_of_clone)
""",
    "unshare-tool": "print(subprocess.run(['unshare', '--user', '--mount', 'true'], capture_output=True).returncode)",
}


@pytest.mark.parametrize("probe", NAMESPACE_PROBES)
def test_new_user_and_mount_namespaces_are_refused_inside(box, probe):
    res = box.run(_PROBE_PRELUDE + NAMESPACE_PROBES[probe])
    refused = "1" if probe == "unshare-tool" else str(errno.EPERM)  # the tool exits 1 when unshare fails
    assert (res.status, res.stdout) == ("ok", f"{refused}\n"), res


# The tester's attack: a unit that counts its own runs in a store every run shares.
REFERENCE = "def f(x):\n    return x + 1\n"
NEGATIVES = ["def f(x):\n    return x\n", "def f(x):\n    return x + 2\n", "def f(x):\n    return 2 * x\n"]


def _separation(runner: CodeRunner, steps: tuple) -> float:
    """The code team's tester score for `steps` (workflows/code_team.py: the reference must pass
    twice, then the share of known-wrong programs caught; a failing reference scores below 0)."""
    first, second = runner.run_units([(REFERENCE, steps), (REFERENCE, steps + (("pass", False),))])
    if not (first.all_passed and second.all_passed):
        return -1.0
    return sum(run.caught for run in runner.run_units([(p, steps) for p in NEGATIVES])) / len(NEGATIVES)


@pytest.mark.parametrize("store", ["sysv_sem", "sysv_shm", "mqueue", "keyring"])
def test_a_tester_counting_its_runs_earns_no_more_than_a_no_op_test(store):
    key, name = _names()
    counting = ((counter_source(store, key, name) + "runs = bump()\n", False),
                ("assert f(1) is not None and runs <= 2", True))
    no_op = (("assert f(1) is not None", True),)
    runner = CodeRunner(cpu_time_s=2.0, workers=1)  # one worker: the keyring is per user id, so per worker
    try:
        if runner._box().isolation["sandbox_uid"] is None:
            pytest.skip("needs root (ctypes is blocked in the other layers)")
        assert _separation(runner, counting) <= _separation(runner, no_op) == 0.0
    finally:
        runner.close()
        _remove_from_host(store, key, name)
