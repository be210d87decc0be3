"""A process's peak resident memory (Linux), for the per-worker memory figures of the benchmarks."""

from __future__ import annotations

from pathlib import Path


def peak_rss_mb(reset: bool = False) -> float:
    """VmHWM of this process in MiB; reset: afterwards the peak restarts from the current RSS.

    The reset writes 5 to /proc/self/clear_refs (Linux >= 4.0), so one worker can report the peak of
    one phase (e.g. an update) apart from what it needed before (e.g. unpacking the full model).
    """
    status = Path("/proc/self/status")
    if not status.exists():
        raise OSError("peak RSS is read from /proc/self/status, which only Linux has")
    if reset:
        Path("/proc/self/clear_refs").write_text("5")
    for line in status.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise OSError("/proc/self/status has no VmHWM line")
