"""Programs that wait instead of computing are ended by the idle limit, not the 30 s backstop.

A program that sleeps, blocks on a read or stops itself (SIGSTOP) uses no CPU, so the CPU limit
never ends it, and it used to hold a worker for the whole wall-clock backstop (10 x cpu + 10 s),
which could stall a training step. The idle limit (SandboxLimits.idle_time_s, by default equal
to cpu_time_s) counts only time in which no thread of the program could use a CPU, so load does
not add to it (tests/sandbox/test_load_independent.py keeps the verdicts of computing programs
the same under load).
"""

from __future__ import annotations

import time

import pytest
from test_load_independent import one_core

from teamrl.sandbox import Sandbox, SandboxLimits
from teamrl.workflows.code_runner import CodeRunner

# The code team's limits: 2 s of CPU and the default backstop (30 s).
LIMITS = SandboxLimits(cpu_time_s=2.0, memory_mb=256)
# Ends quickly: the idle limit (2 s) plus the worker's sampling and clean-up, far below 30 s.
QUICK_S = 6.0

WAITING = {
    "sleep": "import time\nprint('started', flush=True)\ntime.sleep(100)",
    "stop-itself": "import os, signal\nprint('started', flush=True)\nos.kill(os.getpid(), signal.SIGSTOP)",
    "blocked-read": "import os\nprint('started', flush=True)\nr, w = os.pipe()\nos.read(r, 1)",
    "chatty-sleep": "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.02)",
}


@pytest.fixture(scope="module")
def box():
    with Sandbox(LIMITS, workers=1) as sandbox:
        yield sandbox


@pytest.mark.parametrize("name", WAITING)
def test_a_waiting_program_is_ended_by_the_idle_limit(box, name):
    start = time.monotonic()
    res = box.run(WAITING[name])
    took = time.monotonic() - start
    assert (res.status, res.limit, res.timed_out) == ("timeout", "idle", True), res
    assert res.stdout.startswith("started\n" if name != "chatty-sleep" else "tick\n")
    assert LIMITS.idle_time_s <= took < QUICK_S, took
    assert box.run("print('next')").stdout == "next\n"  # the worker is free again


WAITING_FUNCTIONS = {
    "sleep": "import time\ndef f(x):\n    time.sleep(100)\n    return x + 1\n",
    "stop-itself": "import os, signal\ndef f(x):\n    os.kill(os.getpid(), signal.SIGSTOP)\n    return x + 1\n",
}


@pytest.mark.parametrize("name", WAITING_FUNCTIONS)
def test_a_waiting_program_is_rewarded_nothing_and_released_quickly(name):
    runner = CodeRunner(cpu_time_s=2.0, workers=1)
    steps = (("assert f(1) == 2", True), ("assert f(2) == 3", True))
    try:
        start = time.monotonic()
        (run,) = runner.run_units([(WAITING_FUNCTIONS[name], steps)])
        took = time.monotonic() - start
    finally:
        runner.close()
    assert run.passed == [False, False] and not run.all_passed, run
    assert took < QUICK_S, took


def test_the_idle_limit_defaults_to_the_cpu_limit():
    assert SandboxLimits(cpu_time_s=2.0).idle_time_s == 2.0
    assert SandboxLimits(cpu_time_s=2.0, idle_time_s=0.5).idle_time_s == 0.5
    with pytest.raises(ValueError, match="idle_time_s"):
        SandboxLimits(idle_time_s=0)


def test_a_short_wait_under_the_limit_is_not_cut_off(box):
    # Waits 1 s in all (under the 2 s limit), in small sleeps between bits of computing.
    code = "import time\nfor _ in range(10):\n    time.sleep(0.1)\n    sum(range(10000))\nprint('done')"
    res = box.run(code)
    assert (res.status, res.stdout) == ("ok", "done\n"), res


def test_a_computing_program_on_a_loaded_core_never_runs_into_the_idle_limit():
    # 1.5 s of CPU under a 0.3 s idle limit, on one core shared with two burners: it waits for the
    # CPU (runnable, not sleeping) for longer than the idle limit several times over, and is never cut.
    code = "import time\nwhile time.process_time() < 1.5:\n    pass\nprint('done')"
    limits = SandboxLimits(cpu_time_s=3.0, idle_time_s=0.3, memory_mb=256)
    with one_core(burners=2), Sandbox(limits, workers=1) as sandbox:
        res = sandbox.run(code)
    # The wait is what makes the test mean something; how long it is depends on what else the machine
    # runs (on a machine already loaded the burners' share is smaller), so only its size is required.
    assert res.wall_s - res.cpu_s > 2 * limits.idle_time_s, res
    assert (res.status, res.stdout) == ("ok", "done\n"), res
