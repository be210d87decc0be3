"""Running the code team's programs in the sandbox, cached: ground-truth grading and model-written tests."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from teamrl.tasks.code_data import CodeProblem
from teamrl.workflows.code_parsing import Steps

if TYPE_CHECKING:
    from teamrl.sandbox import Sandbox


@dataclass
class UnitRun:
    """Verdicts of one program against one set of model-written unit tests."""

    passed: list[bool]
    errors: list[str]
    loaded: bool
    units: list[str] = field(default_factory=list)  # the units' sources, for prompts
    stopped: list[bool] = field(default_factory=list)  # failed because a time limit ended the run (per unit)

    @property
    def n_passed(self) -> int:
        return sum(self.passed)

    @property
    def caught(self) -> bool:
        """Some unit failed on its own merits (a false assert, an exception, a failed load), not
        because a time limit ended the run first: what makes a known-wrong program "killed"."""
        stopped = self.stopped + [False] * (len(self.passed) - len(self.stopped))  # none given: none stopped
        return any(not ok and not stop for ok, stop in zip(self.passed, stopped))

    @property
    def all_passed(self) -> bool:
        return self.loaded and bool(self.passed) and all(self.passed)

    def summary(self) -> str:
        """'2/3 passed' plus the first failure, for prompts."""
        if not self.loaded:
            return f"program failed to load ({self.errors[0] if self.errors else 'error'})"
        text = f"{self.n_passed}/{len(self.passed)} passed"
        failed = next((i for i, ok in enumerate(self.passed) if not ok), None)
        if failed is None:
            return text
        source = self.units[failed] if failed < len(self.units) else f"unit {failed}"
        return f"{text}; first failure: {source} -> {self.errors[failed][:120]}"


class UnitRunner(Protocol):
    """What the code workflow runs programs with: `CodeRunner` (sandboxed), or an in-process stand-in."""

    def ground_truth(self, jobs: list[tuple[str, CodeProblem]]) -> list[tuple[float, str]]: ...

    def run_units(self, jobs: list[tuple[str, Steps]]) -> list[UnitRun]: ...

    def close(self) -> None: ...


class CodeRunner:
    """Runs programs in the sandbox, cached: ground-truth grading and model-written unit tests."""

    def __init__(
        self, cpu_time_s: float = 2.0, workers: int = 2, cache_size: int = 50_000, wall_time_s: float | None = None
    ) -> None:
        """cpu_time_s: the CPU seconds a program (and the tests' judge) may use: the limit that
        decides, the same on a busy machine as on an idle one. wall_time_s: the wall-clock
        backstop for programs that wait; None: the sandbox's generous default (SandboxLimits)."""
        self.cpu_time_s, self.wall_time_s = cpu_time_s, wall_time_s
        self.workers, self.cache_size = workers, cache_size
        self._cache: OrderedDict[Any, Any] = OrderedDict()
        self._sandbox: Sandbox | None = None  # started on first use

    def _box(self) -> Any:
        if self._sandbox is None:
            from teamrl.sandbox import Sandbox, SandboxLimits

            limits = SandboxLimits(wall_time_s=self.wall_time_s, cpu_time_s=self.cpu_time_s)
            self._sandbox = Sandbox(limits, workers=self.workers)
        return self._sandbox

    def _cached(self, keys: list[Any], compute: Any) -> list[Any]:
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            for key, value in zip(missing, compute(missing)):
                self._cache[key] = value
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return [self._cache[k] for k in keys]

    def ground_truth(self, jobs: list[tuple[str, CodeProblem]]) -> list[tuple[float, str]]:
        """(pass ratio, status) of each program on its problem's ground-truth tests."""

        def compute(keys: list[Any]) -> list[tuple[float, str]]:
            results = self._box().run_tests_many(
                [
                    {"program": program, "tests": tests, "entry_point": entry, "setup": setup}
                    for _, program, tests, entry, setup in keys
                ]
            )
            return [(r.pass_ratio, r.status) for r in results]

        return self._cached([("gt", program, p.tests, p.entry_point, p.test_setup) for program, p in jobs], compute)

    def run_units(self, jobs: list[tuple[str, Steps]]) -> list[UnitRun]:
        """Each program against its model-written unit tests (program and tests in separate processes)."""

        def compute(keys: list[Any]) -> list[UnitRun]:
            results = self._box().run_untrusted_tests_many([(program, steps) for _, program, steps in keys])
            return [_read_units(r, [src for src, unit in steps if unit]) for r, (_, _, steps) in zip(results, keys)]

        return self._cached([("units", program, steps) for program, steps in jobs], compute)

    def close(self) -> None:
        """Stop the sandbox workers."""
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


# How the judge words a unit that failed because the program stopped answering or the tests were
# cut off (sandbox/judge.py); within a run that timed out, such a failure is the time limit's doing.
_CUT_OFF = ("CandidateGone", "not run")


def _read_units(result: Any, units: list[str]) -> UnitRun:
    """A sandbox TestResult as a UnitRun; a unit that never reported (crash, timeout) failed.

    In a run that hit a time limit, the unit that was running and those after it are marked
    `stopped`: they failed because time ran out, not because of what they check.
    """
    total = len(units)
    timed_out = result.status == "timeout"
    if not result.program_loaded:
        return UnitRun([False] * total, [result.error] * total, False, units, [timed_out] * total)
    passed, errors = [False] * total, [f"not run ({result.status})"] * total
    stopped = [timed_out] * total
    for case in result.cases[:total]:
        passed[case.index] = case.passed
        if case.error != "not run":
            errors[case.index] = case.error
        stopped[case.index] = timed_out and not case.passed and case.error.startswith(_CUT_OFF)
    return UnitRun(passed, errors, True, units, stopped)
