"""Verdicts that do not depend on the machine's load: CPU-time limits, a generous wall backstop.

The loaded runs pin this process (and so the sandbox workers and the burners it starts) to one
core, with two processes burning it: a program then gets about a third of a core whatever the
machine has, and each test checks that the load really slowed it down before comparing verdicts. Each
burner has its own session, as each sandboxed program has: under the kernel's autogroup scheduling a
session shares a core with the other sessions, so two burners in one session would take half of it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from teamrl.sandbox import Sandbox, SandboxLimits, wall_backstop_s
from teamrl.workflows.code_runner import CodeRunner

LIMITS = SandboxLimits(cpu_time_s=1.0, memory_mb=256)
# Uses 0.4 s of CPU time whatever the load: under a 1 s wall limit, as the sandbox had before, it
# timed out once it got less than 40% of a core.
COMPUTE = "import time\nwhile time.process_time() < 0.4:\n    pass\nprint('done')"
PROGRAMS = {"compute": COMPUTE, "loop": "while True:\n    pass", "quick": "print(sum(range(1000)))",
            "error": "1 / 0"}
# Its first call spends 0.4 s of CPU time.
UNIT_PROGRAM = "import time\ndef f(x):\n    while time.process_time() < 0.4:\n        pass\n    return 3 * x + 1\n"
UNIT_STEPS = [("assert f(1) == 4", True), ("assert f(2) == 7", True)]


@contextlib.contextmanager
def one_core(burners: int) -> Iterator[None]:
    """Pin this process to one core and start `burners` processes spinning on it."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
             for _ in range(burners)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        os.sched_setaffinity(0, before)


def verdicts(burners: int) -> tuple[dict, dict]:
    """Run PROGRAMS and the unit tests in a fresh sandbox on one core shared with `burners`."""
    with one_core(burners), Sandbox(LIMITS, workers=1) as box:
        runs = {name: box.run(code) for name, code in PROGRAMS.items()}
        units = box.run_untrusted_tests(UNIT_PROGRAM, UNIT_STEPS)
    return runs, {"status": units.status, "passed": [c.passed for c in units.cases], "wall_s": units.wall_s}


def test_the_default_wall_limit_is_a_generous_backstop():
    assert wall_backstop_s(2.0) == 30.0
    assert SandboxLimits(cpu_time_s=2.0).wall_time_s == 30.0
    assert SandboxLimits().wall_time_s == wall_backstop_s(SandboxLimits().cpu_time_s)
    assert SandboxLimits(wall_time_s=3.0, cpu_time_s=2.0).wall_time_s == 3.0  # an explicit one is kept
    with pytest.raises(ValueError, match="cpu_time_s"):
        SandboxLimits(cpu_time_s=0)


def test_the_same_programs_get_the_same_verdicts_with_and_without_competing_load():
    idle, idle_units = verdicts(burners=0)
    busy, busy_units = verdicts(burners=2)
    # The load is real: the computing program got well under a core.
    assert busy["compute"].wall_s > 1.5 * busy["compute"].cpu_s, (busy["compute"].wall_s, busy["compute"].cpu_s)
    assert {n: r.status for n, r in idle.items()} == {n: r.status for n, r in busy.items()} == {
        "compute": "ok", "loop": "timeout", "quick": "ok", "error": "error"}
    assert busy["compute"].stdout == "done\n" and busy["loop"].limit == idle["loop"].limit == "cpu"
    assert 0.35 < busy["compute"].cpu_s < 0.9  # what was counted is CPU time, not the slowed wall time
    assert (idle_units["status"], idle_units["passed"]) == (busy_units["status"], busy_units["passed"]) == (
        "ok", [True, True])


def test_a_waiting_program_meets_the_wall_backstop_not_the_cpu_limit():
    with Sandbox(SandboxLimits(wall_time_s=1.0, cpu_time_s=5.0, memory_mb=256), workers=1) as box:
        res = box.run("import time\ntime.sleep(30)")
    assert res.status == "timeout" and res.limit == "wall" and res.cpu_s < 0.5


@pytest.fixture(scope="module")
def runner():
    runner = CodeRunner(cpu_time_s=1.0, workers=2)
    yield runner
    runner.close()


def test_a_unit_cut_off_by_the_time_limit_catches_nothing(runner):
    steps = (("assert f(1) == 4", True), ("assert f(2) == 7", True))
    looping = "def f(x):\n    while True:\n        pass\n"
    wrong_then_looping = "def f(x):\n    if x == 2:\n        while True:\n            pass\n    return 0\n"
    wrong = "def f(x):\n    return 0\n"
    right = "def f(x):\n    return 3 * x + 1\n"
    loop_run, mixed_run, wrong_run, right_run = runner.run_units(
        [(looping, steps), (wrong_then_looping, steps), (wrong, steps), (right, steps)])
    # Timed out on every unit: failed, but not caught (and not passed: the episode goes on).
    assert loop_run.passed == [False, False] and loop_run.stopped == [True, True]
    assert not loop_run.caught and not loop_run.all_passed
    # A false assert before the timeout still counts.
    assert mixed_run.stopped == [False, True] and mixed_run.caught
    assert wrong_run.caught and wrong_run.stopped == [False, False]
    assert right_run.all_passed and not right_run.caught


def test_programs_compute_with_one_thread_whatever_the_trainer_uses():
    # Several programs run at once (one per worker): a numeric library starting a thread per core
    # in each would crowd the cores the trainer's threads were counted on.
    with Sandbox(LIMITS, workers=1) as box:
        res = box.run("import os\nprint(os.environ['OMP_NUM_THREADS'], os.environ['OPENBLAS_NUM_THREADS'], "
                      "os.environ['MKL_NUM_THREADS'])")
    assert res.stdout.split() == ["1", "1", "1"]
