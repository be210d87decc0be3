"""How many threads torch computes with: a fixed count, or `auto` for a machine others share.

Torch starts one thread per core. When another process takes one of those cores, every parallel
region waits for the thread that is not running, and a step gets 10-30x slower than with one
thread (measured on 2 cores, benchmarks/busy_machine.py). `auto` therefore uses only the cores
nobody else is using: the cores this process may run on (CPU affinity, a cgroup CPU quota) minus
the load of the other processes, rounded down, at least 1 and at most AUTO_CAP. The other
processes' load is the larger of two readings:
- the 1-minute load average less this process's own CPU use: slow to fall when a job ends, so a
  freed core is taken back only gradually (never too early);
- the CPU time the other processes actually used on this process's cores over the last interval
  (`/proc/stat` minus this process's own CPU time): immediate, because the load average takes a
  minute or more to show a job that has just started (measured: `auto` kept 2 threads for the
  first steps beside a new core-burning process and ran 2.4x slower than 1 thread).
The training loop decides again before every step over the interval since the previous one; a
first decision samples 0.2 s. Where OMP_NUM_THREADS is set, `auto` takes that count instead:
whoever started the process chose.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

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


FIRST_SAMPLE_S = 0.2  # how long a first decision watches the other processes' CPU use


def busy_cpu_seconds(stat_text: str, cpus: set[int], ticks_per_second: float) -> float:
    """CPU seconds the `cpus` spent busy since boot, from the text of /proc/stat.

    Busy is every field but idle and iowait (user, nice, system, irq, softirq and steal: time the
    hypervisor gave another machine is not ours to use either); guest time is already in user.

    >>> busy_cpu_seconds("cpu  9 0 9 9 0 0 0 0\\ncpu0 10 0 5 100 3 1 1 2 0 0\\ncpu1 4 0 0 0 0 0 0 0", {0}, 100)
    0.19
    """
    busy = 0
    for line in stat_text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit() or int(name[3:]) not in cpus:
            continue
        values = [int(x) for x in rest.split()[:8]]
        busy += sum(values) - values[3] - (values[4] if len(values) > 4 else 0)
    return busy / ticks_per_second


def other_cores(busy_before: float, busy_after: float, own_cpu_s: float, wall_s: float) -> float:
    """Cores the other processes kept busy over an interval: busy CPU seconds not this process's, per second.

    >>> other_cores(100.0, 103.0, 1.0, 2.0)  # 3 busy CPU seconds in 2 s, 1 of them ours
    1.0
    """
    if wall_s <= 0:
        return 0.0
    return max(0.0, busy_after - busy_before - own_cpu_s) / wall_s


def _busy_now() -> float | None:
    """Busy CPU seconds of this process's cores now; None where that cannot be read or is not ours.

    Under a cgroup CPU quota smaller than the affinity the cores are shared with processes outside
    any view from here, so the reading is left out (the load average decides alone).
    """
    if not hasattr(os, "sched_getaffinity"):
        return None
    cpus = os.sched_getaffinity(0)
    if usable_cores() < len(cpus):
        return None
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            text = handle.read()
        return busy_cpu_seconds(text, cpus, os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None


def sample_other_cores(seconds: float = FIRST_SAMPLE_S) -> float | None:
    """Cores the other processes keep busy, watched for `seconds` (this process sleeps meanwhile)."""
    before, cpu, wall = _busy_now(), time.process_time(), time.monotonic()
    if before is None:
        return None
    time.sleep(seconds)
    after = _busy_now()
    if after is None:
        return None
    return other_cores(before, after, time.process_time() - cpu, time.monotonic() - wall)


def auto_threads(cores: int, others_load: float, cap: int = AUTO_CAP) -> int:
    """Threads for `auto`: the whole cores that `others_load` leaves free, between 1 and min(cap, cores).

    >>> auto_threads(2, 1.1)  # a 2-core laptop with one busy process beside us
    1
    >>> auto_threads(2, 0.1), auto_threads(16, 0.3), auto_threads(16, 13.5)
    (2, 4, 2)
    """
    free = math.floor(cores - max(0.0, others_load) + _SLACK)
    return max(1, min(cap, cores, free))


def resolve_threads(
    setting: int | str, own_load: float = 0.0, cap: int | None = None, others_now: float | None = None
) -> int:
    """The thread count `setting` means here and now.

    own_load: cores this process itself keeps busy (its share of the load average, which is not
    another process's). cap: the most threads to use, e.g. the CPUs Ray reserved for an actor
    (bounds a fixed count too; `auto` never goes beyond AUTO_CAP either). others_now: cores the
    other processes used over the last interval (`other_cores`); None: sampled now for
    FIRST_SAMPLE_S seconds (where /proc/stat cannot tell, the load average decides alone).
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
    measured = sample_other_cores() if others_now is None else others_now
    others = max(load - own_load, measured or 0.0)
    return auto_threads(usable_cores(), others, min(cap or AUTO_CAP, AUTO_CAP))


def _environment_threads() -> int:
    """OMP_NUM_THREADS when it is set to a whole number >= 1, else 0."""
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(text) if text.isdigit() and int(text) >= 1 else 0


def set_threads(setting: int | str, cap: int | None = None) -> int:
    """Set torch's intra-op threads from `setting` (see `resolve_threads`); returns the count."""
    count = resolve_threads(setting, cap=cap)
    torch.set_num_threads(count)
    return count


@contextmanager
def threads_set(setting: int | str, cap: int | None = None) -> Iterator[int]:
    """`set_threads(setting)` for the block, then the count torch had before it."""
    before = torch.get_num_threads()
    try:
        yield set_threads(setting, cap)
    finally:
        torch.set_num_threads(before)


class ThreadGovernor:
    """Applies a thread setting before each step; `auto` is re-decided from the load each time.

    This process's own load is its CPU seconds per wall second since the previous call; the other
    processes' CPU use over that interval is read from /proc/stat. Growing is one thread per call,
    so a count is only raised after the load it left behind was seen.
    """

    def __init__(self, setting: int | str, cap: int | None = None) -> None:
        problem = check_threads(setting)
        if problem:
            raise ValueError(f"threads = {problem}: use auto, or a number of threads such as 1")
        self.setting, self.cap = setting, cap
        self.count = 0
        self._cpu, self._wall, self._busy = time.process_time(), time.monotonic(), _busy_now()

    def apply(self) -> int:
        """Set torch's threads for the next step; returns the count."""
        cpu, wall, busy = time.process_time(), time.monotonic(), _busy_now()
        own = (cpu - self._cpu) / (wall - self._wall) if self.count and wall > self._wall else 0.0
        others = None  # the first decision samples
        if self.count and busy is not None and self._busy is not None:
            others = other_cores(self._busy, busy, cpu - self._cpu, wall - self._wall)
        count = resolve_threads(self.setting, own, self.cap, others_now=others)
        if others is None:  # this decision may have sampled: the next interval starts after it
            cpu, wall, busy = time.process_time(), time.monotonic(), _busy_now()
        self._cpu, self._wall, self._busy = cpu, wall, busy
        if self.setting == "auto" and self.count:
            count = min(count, self.count + 1)
        if count != self.count:
            torch.set_num_threads(count)
            self.count = count
        return count
