"""Helpers shared by the sandbox tests (no psutil: everything comes from /proc)."""

from __future__ import annotations

import os

from teamrl.sandbox import SandboxLimits

FAST_LIMITS = SandboxLimits(wall_time_s=2.0, cpu_time_s=2.0, memory_mb=256, max_output_bytes=10_000)


def live_children(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc, no psutil)."""
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
        return [int(x) for x in fh.read().split()]


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid`."""
    found, todo = [], [pid]
    while todo:
        for kid in live_children(todo.pop()):
            found.append(kid)
            todo.append(kid)
    return found


def process_uids(uid: int) -> list[int]:
    """Pids of every process on the machine whose real uid is `uid`."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as fh:
                    for line in fh:
                        if line.startswith("Uid:"):
                            if int(line.split()[1]) == uid:
                                pids.append(int(entry))
                            break
            except OSError:
                continue
    return pids
