"""The CPU limit covers a program's whole process tree, not each process on its own.

RLIMIT_CPU counts per process: with it alone, three forked children each get the full 2 s, 6 s
in all. The worker adds up the CPU of every process below it (proctree.TreeCpuClock) and ends the
program when the sum passes `cpu_time_s`. Programs that start processes within the limit are
untouched.
"""

from __future__ import annotations

import textwrap

import pytest
from teamrl.sandbox import Sandbox, SandboxLimits

# Each child computes until it has used 1.5 s of CPU itself (4.5 s together, against 2 s).
FORKED_BURNERS = textwrap.dedent("""
    import os, time
    kids = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            while time.process_time() < 1.5:
                pass
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    print("finished", round(sum(os.times()[2:4]), 1))
""")

# The main process sleeps while a double-forked, setsid-detached daemon computes: the daemon is
# no descendant of the program's process any more (it re-parents to the worker).
DETACHED_BURNER = textwrap.dedent("""
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            while time.process_time() < 1.8:
                pass
            os._exit(0)
        os._exit(0)
    os.wait()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            while time.process_time() < 1.8:
                pass
            os._exit(0)
        os._exit(0)
    os.wait()
    time.sleep(8)
    print("finished")
""")

# Two interpreters started with subprocess, working in parallel (multiprocessing's pools need
# named semaphores in /dev/shm, which programs do not have).
SUBPROCESSES = textwrap.dedent("""
    import subprocess, sys
    code = "print(sum(x * x for x in range(%d)))"
    procs = [subprocess.Popen([sys.executable, "-c", code % n], stdout=subprocess.PIPE, text=True)
             for n in (1000, 2000)]
    print(sum(int(p.communicate()[0]) for p in procs))
""")
# The CPU limit decides; wall and idle stay at their defaults (LIMITS' 2 s wall would cut first).
LIMITS = SandboxLimits(cpu_time_s=2.0, memory_mb=256, max_output_bytes=10_000)


@pytest.fixture(scope="module")
def box():
    with Sandbox(LIMITS, workers=1) as sandbox:
        if sandbox.isolation["sandbox_uid"] is None:
            pytest.skip("no separate user id here: forking is blocked outright")
        yield sandbox


def test_forked_children_share_one_cpu_limit(box):
    res = box.run(FORKED_BURNERS)
    assert res.status == "timeout" and res.limit == "cpu", res
    assert "finished" not in res.stdout
    # Sampled every 0.1 s on 2 cores: at most about 0.2 s past the limit, plus a clock tick.
    assert LIMITS.cpu_time_s <= res.cpu_s <= LIMITS.cpu_time_s + 0.5, res


def test_a_detached_daemon_counts_too(box):
    res = box.run(DETACHED_BURNER)
    assert res.status == "timeout" and res.limit == "cpu", res
    assert LIMITS.cpu_time_s <= res.cpu_s <= LIMITS.cpu_time_s + 0.5, res


def test_subprocesses_within_the_limit_are_untouched(box):
    res = box.run(SUBPROCESSES)
    expected = sum(x * x for x in range(1000)) + sum(x * x for x in range(2000))
    assert (res.status, res.stdout) == ("ok", f"{expected}\n"), res
    assert res.cpu_s < LIMITS.cpu_time_s


def test_children_below_the_limit_pass():
    quick = FORKED_BURNERS.replace("< 1.5", "< 0.2")
    with Sandbox(LIMITS, workers=1) as sandbox:
        if sandbox.isolation["sandbox_uid"] is None:
            pytest.skip("no separate user id here: forking is blocked outright")
        res = sandbox.run(quick)
    assert res.status == "ok" and res.stdout.startswith("finished"), res
    assert 0.6 <= res.cpu_s < LIMITS.cpu_time_s, res  # the children's CPU is in the report


# In a test run: the function under test has three children compute for it and waits for them.
FORKING_SOLUTION = textwrap.dedent("""
    import os, time

    def add_one(x):
        kids = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                while time.process_time() < 1.5:
                    pass
                os._exit(0)
            kids.append(pid)
        for pid in kids:
            os.waitpid(pid, 0)
        return x + 1
""")


def test_a_test_run_shares_one_cpu_limit_too(box):
    res = box.run_tests(FORKING_SOLUTION, "assert add_one(1) == 2")
    assert res.status == "timeout" and res.passed == 0, res
    assert "CPU" in res.error, res


def test_a_quick_forking_solution_still_passes(box):
    res = box.run_tests(FORKING_SOLUTION.replace("< 1.5", "< 0.1"), "assert add_one(1) == 2")
    assert (res.status, res.passed, res.total) == ("ok", 1, 1), res
