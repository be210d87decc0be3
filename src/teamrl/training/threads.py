"""How many threads torch computes with: a fixed count, or `auto` for a machine others share.

Torch starts one thread per core. When another process takes one of those cores, every parallel
region waits for the thread that is not running, and a step gets 10-30x slower than with one
thread (measured on 2 cores, benchmarks/busy_machine.py). `auto` therefore uses only the cores
nobody else is using: the cores this process may run on (CPU affinity, a cgroup CPU quota) minus
the load of the other processes (the 1-minute load average less this process's own CPU use),
rounded down, at least 1 and at most AUTO_CAP. The training loop decides again before every step,
so a job that starts beside a run makes it drop to fewer threads within a step or two. Where
OMP_NUM_THREADS is set, `auto` takes that count instead: whoever started the process chose.
"""

from __future__ import annotations

import math
import os
import time

import torch

AUTO_CAP = 4  # small models gain little from more intra-op threads; each one more can stall
# Background load (daemons, a terminal) that still leaves a core usable: 2 idle cores with a load
# of 0.2 give 2 threads, a core taken by a busy process (load ~1) does not count as free.
_SLACK = 0.25


def check_threads(value: object) -> str | None:
    """None when `value` is a valid thread setting ("auto" or an int >= 1), else what is wrong."""
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return None
    return f"{value!r} is neither 'auto' nor a whole number >= 1"


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity, capped by a cgroup v2 CPU quota (containers)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as handle:
            quota, period = handle.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota here: the affinity is the bound
    return max(1, cores)


def auto_threads(cores: int, others_load: float, cap: int = AUTO_CAP) -> int:
    """Threads for `auto`: the whole cores that `others_load` leaves free, between 1 and min(cap, cores).

    >>> auto_threads(2, 1.1)  # a 2-core laptop with one busy process beside us
    1
    >>> auto_threads(2, 0.1), auto_threads(16, 0.3), auto_threads(16, 13.5)
    (2, 4, 2)
    """
    free = math.floor(cores - max(0.0, others_load) + _SLACK)
    return max(1, min(cap, cores, free))


def resolve_threads(setting: int | str, own_load: float = 0.0, cap: int | None = None) -> int:
    """The thread count `setting` means here and now.

    own_load: cores this process itself keeps busy (its share of the load average, which is not
    another process's). cap: the most threads to use, e.g. the CPUs Ray reserved for an actor
    (bounds a fixed count too; `auto` never goes beyond AUTO_CAP either).
    """
    problem = check_threads(setting)
    if problem:
        raise ValueError(f"threads = {problem}: use auto, or a number of threads such as 1")
    if setting != "auto":
        return min(int(setting), cap) if cap else int(setting)
    chosen = _environment_threads()
    if chosen:  # whoever started us already decided (a launcher, a test harness, the user)
        return min(chosen, cap) if cap else chosen
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return auto_threads(usable_cores(), load - own_load, min(cap or AUTO_CAP, AUTO_CAP))


def _environment_threads() -> int:
    """OMP_NUM_THREADS when it is set to a whole number >= 1, else 0."""
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(text) if text.isdigit() and int(text) >= 1 else 0


def set_threads(setting: int | str, cap: int | None = None) -> int:
    """Set torch's intra-op threads from `setting` (see `resolve_threads`); returns the count."""
    count = resolve_threads(setting, cap=cap)
    torch.set_num_threads(count)
    return count


class ThreadGovernor:
    """Applies a thread setting before each step; `auto` is re-decided from the load each time.

    This process's own load is its CPU seconds per wall second since the previous call. Growing
    is one thread per call, so a count is only raised after the load it left behind was seen.
    """

    def __init__(self, setting: int | str, cap: int | None = None) -> None:
        problem = check_threads(setting)
        if problem:
            raise ValueError(f"threads = {problem}: use auto, or a number of threads such as 1")
        self.setting, self.cap = setting, cap
        self.count = 0
        self._cpu, self._wall = time.process_time(), time.monotonic()

    def apply(self) -> int:
        """Set torch's threads for the next step; returns the count."""
        cpu, wall = time.process_time(), time.monotonic()
        own = (cpu - self._cpu) / (wall - self._wall) if self.count and wall > self._wall else 0.0
        self._cpu, self._wall = cpu, wall
        count = resolve_threads(self.setting, own, self.cap)
        if self.setting == "auto" and self.count:
            count = min(count, self.count + 1)
        if count != self.count:
            torch.set_num_threads(count)
            self.count = count
        return count
