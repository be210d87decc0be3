"""Processes a program detaches (double fork + setsid) die with their worker, however it ends.

Each escaping program execs `/bin/sleep <marker>` with a unique marker, so the test can look
for survivors anywhere on the machine through /proc, whatever pid namespace they are in.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sandbox_test_helpers import descendants, process_uids

from teamrl.sandbox import Sandbox, SandboxLimits

SLOW_LIMITS = SandboxLimits(wall_time_s=30.0, cpu_time_s=30.0, memory_mb=256)


def _marker() -> str:
    return f"{random.SystemRandom().randint(10**8, 10**9)}.25"


def escaping_program(marker: str) -> str:
    """Detach a `sleep <marker>` from the program's process tree and session, then wait."""
    return textwrap.dedent(f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv("/bin/sleep", ["sleep", "{marker}"])
            os._exit(0)
        os.wait()
        print("detached", flush=True)
        time.sleep(60)
    """)


def processes_with(marker: str) -> list[int]:
    """Pids of every process on the machine whose command line contains `marker`."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if needle in fh.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.parametrize("how", ["crash", "stop"])
@pytest.mark.parametrize("pid_namespace", [True, False], ids=["pid-namespace", "uid-fallback"])
def test_detached_daemon_dies_when_the_worker_is_killed(monkeypatch, pid_namespace, how):
    """crash: the worker's process is SIGKILLed; stop: the pool stops it (WorkerHandle.kill)."""
    monkeypatch.setattr(Sandbox, "_pid_namespace", pid_namespace)
    with Sandbox(SLOW_LIMITS, workers=1) as box:
        if box.isolation["sandbox_uid"] is None:
            pytest.skip("no separate user id here: forking is blocked outright by the guards")
        if box.isolation["pid_namespace"] != pid_namespace:
            pytest.skip(f"no PID namespace on this machine: {box.isolation['notes']}")
        marker = _marker()
        results = []
        runner = threading.Thread(target=lambda: results.append(box.run(escaping_program(marker))))
        runner.start()
        try:
            assert wait_for(lambda: processes_with(marker), 10), "the program never started its daemon"
            victim = box._all[0]
            if how == "crash":
                victim.proc.kill()  # the worker's process (with a PID namespace: its thin parent)
            else:
                victim.kill()
                # Killed and reaped in order: not even a zombie of the worker is left.
                assert not Path(f"/proc/{victim.worker_pid}").exists()
            runner.join(20)
            assert results and results[0].status == "sandbox_error"
            assert wait_for(lambda: not processes_with(marker), 5), f"survivors: {processes_with(marker)}"
        finally:
            runner.join(20)
        assert box.run("print('alive')").stdout == "alive\n"  # the pool replaced the worker
        for worker in box._all:
            assert descendants(worker.worker_pid) == []
            assert process_uids(worker.isolation["sandbox_uid"]) == []


def test_detached_daemon_dies_when_the_grader_is_killed():
    """The grader dies (SIGKILL) mid-program: nobody is left to clean up but the kernel."""
    marker = _marker()
    script = textwrap.dedent(f"""
        import sys
        from teamrl.sandbox import Sandbox, SandboxLimits
        box = Sandbox(SandboxLimits(wall_time_s=2.0, cpu_time_s=2.0), workers=1)
        print(box._all[0].worker_pid, box.isolation["pid_namespace"], box.isolation["sandbox_uid"], flush=True)
        box.run(sys.argv[1])
    """)
    src = str(Path(__file__).resolve().parents[2] / "src")
    proc = subprocess.Popen([sys.executable, "-c", script, escaping_program(marker)], stdout=subprocess.PIPE,
                            text=True, env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"})
    try:
        worker_pid, pid_namespace, uid = proc.stdout.readline().split()
        if uid == "None" or pid_namespace != "True":
            pytest.skip("needs a separate user id (to fork at all) and a PID namespace")
        assert wait_for(lambda: processes_with(marker), 10), "the program never started its daemon"
        proc.kill()
        proc.wait(10)
        # The worker notices the closed request pipe once the program's wall time (2 s) is up.
        assert wait_for(lambda: not Path(f"/proc/{worker_pid}").exists(), 10), "the worker outlived the grader"
        assert wait_for(lambda: not processes_with(marker), 5), f"survivors: {processes_with(marker)}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


MEMORY_BOMB = textwrap.dedent("""
    import os, select, time
    def hog():
        held, mb = [], 0
        try:
            while True:
                held.append(b"x" * (1 << 20))  # written, so resident, not just reserved
                mb += 1
        except MemoryError:
            held.pop()  # room to report in
            return held, mb - 1
    read_end, write_end = os.pipe()
    children = 0
    while True:
        try:
            pid = os.fork()
        except OSError:
            break  # the process limit
        if pid == 0:
            held, mb = hog()
            os.write(write_end, f"{mb}\\n".encode())
            time.sleep(30)  # keep holding it
            os._exit(0)
        children += 1
    held, mine = hog()
    os.close(write_end)
    reports = b""
    while reports.count(b"\\n") < children and select.select([read_end], [], [], 10)[0]:
        reports += os.read(read_end, 64)
    print(children + 1, mine + sum(int(x) for x in reports.split()), reports.count(b"\\n") + 1, flush=True)
    time.sleep(0.5)  # everybody still holds its memory while the grader looks
""")


def _resident_mb(uids: list[int]) -> float:
    """Resident memory of every process whose real uid is in `uids` (from /proc)."""
    total_kb = 0
    for pid in [p for uid in uids for p in process_uids(uid)]:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as fh:
                total_kb += next((int(line.split()[1]) for line in fh if line.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total_kb / 1024


def test_multi_process_memory_bomb_stays_under_the_total_bound():
    limits = SandboxLimits(wall_time_s=20.0, cpu_time_s=20.0, memory_mb=128, max_processes=3)
    assert limits.total_memory_bound_mb == 384
    with Sandbox(limits, workers=1) as box:
        uid = box.isolation["sandbox_uid"]
        if uid is None:
            res = box.run(MEMORY_BOMB)
            assert res.stdout.split()[:1] == ["1"], res  # no forking at all: memory_mb is the bound
            return
        peak, done = [0.0], threading.Event()

        def watch() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _resident_mb([uid]))
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            res = box.run(MEMORY_BOMB)
        finally:
            done.set()
            watcher.join()
        assert res.status == "ok", res
        processes, held_mb, reported = (int(x) for x in res.stdout.split())
        assert processes == reported == limits.max_processes  # it forked as much as it could...
        assert held_mb <= limits.total_memory_bound_mb  # ...and together they stay under the bound
        assert held_mb > limits.memory_mb  # (the bomb did use several processes' worth)
        assert 0 < peak[0] <= limits.total_memory_bound_mb, peak
        assert process_uids(uid) == []
