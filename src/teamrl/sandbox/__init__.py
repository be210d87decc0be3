"""Run untrusted, model-generated Python programs safely and fast.

    from teamrl.sandbox import Sandbox, SandboxLimits

    with Sandbox(SandboxLimits(cpu_time_s=2.0), workers=2) as box:
        result = box.run("print(sum(range(10)))")
        results = box.run_many(["print(1)", "print(2)"])
        graded = box.run_tests("def f(x):\n    return x", "assert f(1) == 1")  # trusted tests
        checked = box.run_untrusted_tests("def f(x):\n    return x", [("assert f(2) == 2", True)])

A pool of warm worker processes forks one confined child per program (see `pool.py`,
`worker.py`, `child.py`); each worker is pid 1 of a PID namespace of its own where the kernel
allows (`pidns.py`), so nothing a program starts outlives it. Tests run in a judge process apart
from the program (`testrun.py`). `Sandbox.isolation` says which isolation layers are active here.
"""

from .pool import Sandbox, SandboxError, default_hide_paths
from .spec import STATUSES, ProgramResult, SandboxLimits, TestCaseResult, TestResult, wall_backstop_s

__all__ = [
    "STATUSES",
    "ProgramResult",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "TestCaseResult",
    "TestResult",
    "default_hide_paths",
    "wall_backstop_s",
]
