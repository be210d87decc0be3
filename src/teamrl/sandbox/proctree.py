"""The programs' processes as the worker reads them from /proc: their CPU time, their waiting.

`children` lists a process's children (kill_leftovers uses it); `scan` reads every thread and
process below the worker; `IdleClock` measures from a scan how long a running program has spent
waiting instead of computing, for the idle limit; `TreeCpuClock` adds up the CPU time of the
program's whole process tree, for the CPU limit.

Why a tree CPU clock: RLIMIT_CPU counts per process, so with it alone a program that forks
three children gets three times its CPU limit. The worker sees every process a program starts (they are all
its descendants: it is pid 1 of their PID namespace, or their child subreaper), and the kernel
keeps, per process, its own CPU time and that of the children it has reaped
(/proc/<pid>/stat: utime, stime, cutime, cstime). Their sum over the live (and zombie)
processes below the worker counts every CPU second of the program's tree once: a child's time
moves into its parent's cutime when the parent reaps it. Orphans re-parent to the worker, which
reaps nothing while a program runs, so their time stays in their own entries until they are
killed.

Why an idle limit: the CPU limit stops a program that computes too long, whatever the machine's
load, but a program that sleeps, blocks on a read or stops itself (SIGSTOP) uses no CPU, and
used to hold its worker until the generous wall-clock backstop (30 s for 2 s of CPU). The idle
clock counts only time in which no thread of the program (or of the test judge, in a test run)
could use a CPU: every thread sleeping, stopped or dead. A thread that is running or waiting for
a CPU (state R), or in an uninterruptible kernel wait (D: disk, page faults), counts as
computing. So load, which only makes runnable threads wait longer for a CPU, adds nothing to
the idle clock, and a program's verdict under the idle limit is the same on a busy machine.
Stdlib only: this module is loaded inside the bare worker interpreter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import isolation

# Thread states (the letter after the command in /proc/<pid>/task/<tid>/stat) in which a thread
# waits for something other than a CPU: sleeping, stopped, stopped by a tracer, zombie, dead.
WAITING_STATES = frozenset("STtZX")
# How often the idle clock looks at the program's threads while it runs.
SAMPLE_INTERVAL_S = 0.1
_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def read_proc(name: str) -> str:
    """The text of /proc/`name`, through the descriptor the worker kept (its new root may have
    no /proc; see isolation.proc_dir_fd)."""
    fd = isolation.proc_dir_fd
    if fd is None:
        opened = os.open(f"/proc/{name}", os.O_RDONLY | os.O_CLOEXEC)
    else:
        opened = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=fd)
    with open(opened, encoding="ascii", errors="replace") as fh:
        return fh.read()


def _list_proc(name: str) -> list[str]:
    """The entries of the /proc directory `name` ("" for /proc itself), like `read_proc`."""
    fd = isolation.proc_dir_fd
    if fd is None:
        return os.listdir(f"/proc/{name}")
    if not name:
        return os.listdir(fd)
    opened = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    try:
        return os.listdir(opened)
    finally:
        os.close(opened)


def _after_command(stat: str) -> list[str]:
    # The command (field 2) may hold spaces and parentheses: fields resume after the last ")".
    return stat.rsplit(")", 1)[1].split()


def children(pid: int) -> list[int]:
    """The live children of process `pid` (those of its main thread, as the worker has no other)."""
    try:
        return [int(x) for x in read_proc(f"{pid}/task/{pid}/children").split()]
    except FileNotFoundError:  # kernel without CONFIG_PROC_CHILDREN: scan every process
        found = []
        for entry in _list_proc(""):
            if entry.isdigit():
                try:
                    stat = read_proc(f"{entry}/stat")
                except OSError:
                    continue
                if int(_after_command(stat)[1]) == pid:
                    found.append(int(entry))
        return found


@dataclass
class Scan:
    """What one look at the processes below the worker found.

    threads: {tid: (state letter, ns it ran or waited for a CPU)}; cpu_s: {pid: CPU seconds of
    the process and of the children it reaped}.
    """

    threads: dict[int, tuple[str, int]] = field(default_factory=dict)
    cpu_s: dict[int, float] = field(default_factory=dict)


def scan(root: int, skip: frozenset[int] = frozenset()) -> Scan:
    """Every thread and process below `root` (not `root` itself); `skip`: pids left out, with
    the processes below them.

    Children are read per thread: a program may start processes from any of its threads. A
    process's CPU times are read before its children are, so a child reaped in between is
    missed for this look (never counted twice). Processes and threads that end while we look
    are skipped.
    """
    found = Scan()
    todo = [pid for pid in children(root) if pid not in skip]
    while todo:
        pid = todo.pop()
        try:
            times = _after_command(read_proc(f"{pid}/stat"))[11:15]  # utime stime cutime cstime
            found.cpu_s[pid] = sum(int(t) for t in times) / _CLOCK_TICKS_PER_S
            tids = [int(t) for t in _list_proc(f"{pid}/task")]
        except (OSError, ValueError):
            continue
        for tid in tids:
            try:
                state = _after_command(read_proc(f"{pid}/task/{tid}/stat"))[0]
                todo += [
                    kid for kid in (int(x) for x in read_proc(f"{pid}/task/{tid}/children").split()) if kid not in skip
                ]
            except (OSError, IndexError):
                continue
            try:
                # Time on a CPU and time runnable but waiting for one (kernels with schedstat).
                ran, waited = read_proc(f"{pid}/task/{tid}/schedstat").split()[:2]
                busy = int(ran) + int(waited)
            except (OSError, ValueError):
                busy = 0
            found.threads[tid] = (state, busy)
    return found


class TreeCpuClock:
    """CPU seconds used by a program's whole process tree (see the module docstring).

    The worker feeds it a `scan` about every SAMPLE_INTERVAL_S while the program runs; the
    program is over its limit once the sum passes `limit_s`. Between two looks it can use up to
    one interval per core more, and a process that starts and ends unreaped between two looks
    is not seen (its parent's cutime has it once reaped).
    """

    def __init__(self, limit_s: float, exclude: frozenset[int] = frozenset()):
        """limit_s: CPU seconds allowed to all of the program's processes together; exclude:
        processes below the worker that are not the program's (a test run's judge, which has a
        CPU limit of its own; what it starts counts for the program)."""
        if not limit_s > 0:
            raise ValueError(f"the CPU limit must be positive, got {limit_s!r}")
        self.limit_s = limit_s
        self.exclude = exclude
        self.cpu_s = 0.0

    def account(self, found: Scan) -> None:
        """Take the CPU time of the processes in `found` (never less than a look before saw)."""
        used = sum(cpu for pid, cpu in found.cpu_s.items() if pid not in self.exclude)
        self.cpu_s = max(self.cpu_s, used)

    @property
    def over(self) -> bool:
        """Whether the program's processes together have used more than the limit."""
        return self.cpu_s > self.limit_s


class IdleClock:
    """Seconds a program has spent waiting instead of computing (see the module docstring).

    The worker calls `sample` about every SAMPLE_INTERVAL_S while the program runs. When, at a
    sample, every thread below the worker waits, the time since the last sample counts as idle,
    less the time those threads ran or waited for a CPU in between (the kernel's schedstat, so a
    thread that computed for part of the interval and then went to sleep is credited exactly).
    """

    def __init__(self, worker_pid: int, limit_s: float, start: float):
        """worker_pid: the program's processes are all its descendants; limit_s: idle seconds
        allowed; start: the monotonic time the program was started at."""
        if not limit_s > 0:
            raise ValueError(f"the idle limit must be positive, got {limit_s!r}")
        self.worker_pid = worker_pid
        self.limit_s = limit_s
        self.idle_s = 0.0
        self._last_time = start
        self._last_busy: dict[int, int] = {}

    def sample(self, now: float, credit: bool = True, found: Scan | None = None) -> None:
        """Look at the program's threads at `now`.

        credit: False when the worker itself had work for the program since the last sample
        (output to drain, input to write): the program may have been waiting for the worker,
        which load can delay, so that interval is never counted as idle.
        found: a scan just made below the worker (default: scan now).
        """
        threads = (found if found is not None else scan(self.worker_pid)).threads
        if credit and threads and all(state in WAITING_STATES for state, _ in threads.values()):
            busy_ns = sum(max(0, busy - self._last_busy.get(tid, 0)) for tid, (_, busy) in threads.items())
            self.idle_s += max(0.0, (now - self._last_time) - busy_ns / 1e9)
        self._last_time = now
        self._last_busy = {tid: busy for tid, (_, busy) in threads.items()}

    @property
    def over(self) -> bool:
        """Whether the program has waited longer than the limit."""
        return self.idle_s > self.limit_s
