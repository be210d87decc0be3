"""Run untrusted, model-generated Python programs safely and fast.

    from teamrl.sandbox import Sandbox, SandboxLimits

    with Sandbox(SandboxLimits(wall_time_s=2.0), workers=2) as box:
        result = box.run("print(sum(range(10)))")
        results = box.run_many(["print(1)", "print(2)"])

A pool of warm worker processes forks one confined child per program (see `pool.py`,
`worker.py`, `child.py`); `Sandbox.isolation` says which isolation layers are active here.
"""

from .pool import Sandbox, SandboxError, default_hide_paths
from .spec import STATUSES, ProgramResult, SandboxLimits, TestCaseResult, TestResult

__all__ = [
    "STATUSES", "ProgramResult", "Sandbox", "SandboxError", "SandboxLimits", "TestCaseResult",
    "TestResult", "default_hide_paths",
]
