"""Plain data types of the sandbox API: the limits a program runs under and what came back.

These are used on the trusted (grader) side only; the worker processes receive the limits as a
JSON dict made by `SandboxLimits.to_wire`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

# The wall-clock backstop when none is given: WALL_BACKSTOP_FACTOR x the CPU limit plus
# WALL_BACKSTOP_EXTRA_S. The CPU limit decides a busy program's fate whatever the machine's load;
# the backstop only catches programs that wait (sleep, block) instead of computing, and must not
# fire first for a program that computes on a loaded machine. Factor 10: a program still gets its
# full CPU time when it receives a tenth of a core, and a test run (program and judge, each held
# to the CPU limit, taking turns) when each gets a fifth.
WALL_BACKSTOP_FACTOR = 10.0
WALL_BACKSTOP_EXTRA_S = 10.0


def wall_backstop_s(cpu_time_s: float) -> float:
    """The default wall-clock limit for a CPU limit of `cpu_time_s` seconds.

    >>> wall_backstop_s(2.0)
    30.0
    """
    return WALL_BACKSTOP_FACTOR * float(cpu_time_s) + WALL_BACKSTOP_EXTRA_S


# Every status a ProgramResult can carry.
STATUSES = (
    "ok",  # exited with code 0
    "error",  # exited with a non-zero code (e.g. an uncaught exception)
    "timeout",  # CPU-time limit hit, the idle limit (waited instead of computing), or the wall-clock backstop
    "memory",  # ran out of the address-space limit (MemoryError or killed while allocating)
    "output_limit",  # wrote more than max_output_bytes to stdout or stderr
    "killed",  # died from a signal that is not explained by one of the limits above
    "sandbox_error",  # the sandbox itself failed (worker crashed, bad request); not the program's fault
)


@dataclass
class SandboxLimits:
    """Resource limits applied to every program (and every process it starts).

    Time: `cpu_time_s` is the limit that decides; it counts the CPU the program used, all its
    processes together (see proctree.TreeCpuClock), which the load on the machine does not
    change (much), so the same program gets the same verdict on an
    idle and a busy machine. `idle_time_s` ends a program that waits instead of computing
    (sleeps, blocks on a read, stops itself): it counts only time in which none of the
    program's threads could use a CPU, which load does not add to (see proctree.IdleClock); left
    at None it equals `cpu_time_s`: a program may wait as long as it may compute. `wall_time_s`
    is the last backstop; left at None it is `wall_backstop_s(cpu_time_s)`, generous enough not
    to fire first on a loaded machine. A wall limit set close to the CPU limit makes verdicts
    depend on the load again (a computing program is then killed by whichever comes first).
    """

    wall_time_s: float | None = field(
        default=None,
        metadata={
            "help": "Wall-clock seconds from start until the program is killed (status 'timeout'); "
            "None: the generous backstop wall_backstop_s(cpu_time_s) = 10 x cpu_time_s + 10."
        },
    )
    cpu_time_s: float = field(
        default=5.0,
        metadata={
            "help": "CPU seconds, rounded up to whole seconds, that the program's processes may use "
            "together before it is killed (status 'timeout'): the time limit verdicts rest on."
        },
    )
    idle_time_s: float | None = field(
        default=None,
        metadata={
            "help": "Seconds a program may spend with none of its threads running or waiting for a "
            "CPU (sleeping, blocked, stopped) before it is killed (status 'timeout', limit 'idle'); "
            "None: equal to cpu_time_s."
        },
    )
    memory_mb: int = field(
        default=512,
        metadata={
            "help": "Address-space limit (RLIMIT_AS) in MiB for each process of the program; all its "
            "processes together stay under max_processes x memory_mb (see total_memory_bound_mb)."
        },
    )
    max_output_bytes: int = field(
        default=64_000,
        metadata={
            "help": "Bytes kept from each of stdout and stderr; writing more kills the program (status 'output_limit')."
        },
    )
    max_file_bytes: int = field(
        default=10_000_000,
        metadata={"help": "Largest file the program may write (RLIMIT_FSIZE), in bytes."},
    )
    max_processes: int = field(
        default=4,
        metadata={
            "help": "Processes plus threads the program may have at once (RLIMIT_NPROC), kept low "
            "because it multiplies the memory limit; enforced when the sandbox runs programs under "
            "their own user id (needs root), and without one a program cannot fork at all."
        },
    )
    max_open_files: int = field(
        default=64,
        metadata={"help": "Open file descriptors per process (RLIMIT_NOFILE)."},
    )

    def __post_init__(self) -> None:
        for name in ("cpu_time_s", "wall_time_s", "idle_time_s"):
            if name == "wall_time_s" and self.wall_time_s is None:
                self.wall_time_s = wall_backstop_s(self.cpu_time_s)
            if name == "idle_time_s" and self.idle_time_s is None:
                self.idle_time_s = float(self.cpu_time_s)
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"SandboxLimits.{name} must be a positive finite number, got {value!r}")
        for name in ("memory_mb", "max_output_bytes", "max_file_bytes", "max_processes", "max_open_files"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
                raise ValueError(f"SandboxLimits.{name} must be a positive int, got {value!r}")
        if self.max_open_files < 8:
            # The interpreter itself needs a handful of descriptors (stdio, pipes, imports).
            raise ValueError(f"SandboxLimits.max_open_files must be at least 8, got {self.max_open_files}")
        if self.memory_mb < 64:
            raise ValueError(f"SandboxLimits.memory_mb must be at least 64 (Python needs it), got {self.memory_mb}")

    @property
    def total_memory_bound_mb(self) -> int:
        """Most memory (MiB of address space) all of one program's processes can hold together.

        Each process is held to memory_mb by RLIMIT_AS and there are at most max_processes of them
        (RLIMIT_NPROC under the program's own user id; without one, forking is blocked and the
        bound is memory_mb). Kernel memory (page tables, pipe buffers) comes on top. A cgroup
        memory limit is not used: it needs a delegated cgroup v2 hierarchy with the memory
        controller, which the machines this was built on do not offer.
        """
        return self.max_processes * self.memory_mb

    def to_wire(self) -> dict[str, Any]:
        """The limits as a JSON-able dict for the worker processes."""
        return asdict(self)


@dataclass
class ProgramResult:
    """What one program run produced.

    stdout, stderr: decoded as UTF-8 (invalid bytes replaced), each cut at max_output_bytes.
    exit_code: the process exit code, or None when it was killed by a signal / never ran.
    timed_out: the CPU-time limit, the idle limit or the wall-clock backstop was hit.
    status: one of `STATUSES` ("ok", "error", "timeout", "memory", "output_limit", "killed",
        "sandbox_error").
    wall_s: wall-clock seconds the program ran (measured by the worker).
    cpu_s: CPU seconds (user + system) of the program's processes together, which load barely changes.
    limit: which limit ended it when timed out: "cpu", "idle" (it waited instead of computing) or
        "wall" (the backstop); "" otherwise.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    status: str
    wall_s: float
    cpu_s: float = 0.0
    limit: str = ""

    @property
    def ok(self) -> bool:
        """True when the program exited normally with code 0."""
        return self.status == "ok"


@dataclass
class TestCaseResult:
    """Outcome of one test unit (one assert, or one top-level statement of `check`)."""

    index: int
    passed: bool
    source: str
    error: str = ""


@dataclass
class TestResult:
    """Verdict of `Sandbox.run_tests`.

    passed / total: test units that passed, out of all units found in the tests (an MBPP assert
        line, or a top-level statement of a HumanEval `check` function that contains an assert).
        Units that never ran (program crashed, timed out) count as failed.
    status: "ok" (all units ran; some may have failed), "error" (the program failed to load, the
        tests could not be parsed, or a unit outside the counted ones raised), "timeout",
        "memory", "output_limit", "killed" or "sandbox_error".
    cases: one TestCaseResult per unit, in order.
    program_stdout, program_stderr: what the candidate program printed (capped).
    error: a short explanation when status is not "ok".
    wall_s: wall-clock seconds for the whole run.
    program_loaded: False when the program itself failed before the tests could call it (raised
        or exited at top level); True otherwise, including when that is unknown (a timeout).
    """

    passed: int
    total: int
    status: str
    cases: list[TestCaseResult] = field(default_factory=list)
    program_stdout: str = ""
    program_stderr: str = ""
    error: str = ""
    wall_s: float = 0.0
    program_loaded: bool = True

    __test__ = False  # keep pytest from collecting this class because of its name

    @property
    def pass_ratio(self) -> float:
        """passed / total, 0.0 when there are no units."""
        return self.passed / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        """True when there is at least one unit and every unit passed."""
        return self.total > 0 and self.passed == self.total
