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


@pytest.mark.parametrize("pid_namespace", [True, False], ids=["pid-namespace", "uid-fallback"])
def test_detached_daemon_dies_when_the_worker_is_killed(monkeypatch, pid_namespace):
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
            box._all[0].proc.kill()  # what happens to a stuck worker (and to its thin parent)
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
