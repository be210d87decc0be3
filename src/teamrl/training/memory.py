"""Peak memory of one policy's update: CUDA's allocator high-water mark, or resident-set growth on CPU.

On a CUDA device the figure is `torch.cuda.max_memory_allocated` over the update, after resetting
the peak at its start: everything the allocator handed out at the worst moment (weights, gradients,
AdamW state, activations), the number an OOM is about.

On CPU the process's resident set holds far more than the policy (Python, libraries, the rollout
engine, other policies), so the figure is the *growth*: the highest resident set size seen during
the update minus the size at its start. A thread samples /proc/self/statm every 20 ms
(resetting the kernel's own high-water mark instead would corrupt anyone else's `ru_maxrss`), so
a spike shorter than that can be missed, and memory the allocator kept from an earlier step is
reused without growing the resident set: the first step shows the optimizer state and the
activations, later steps mostly what exceeds the earlier peaks. Without /proc (macOS) the growth
of `ru_maxrss` is reported, which is 0 whenever an earlier moment was higher.
"""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path
from types import TracebackType

import torch

STATM = Path("/proc/self/statm")
POLL_S = 0.02
"""The watcher's period. Each poll costs the process ~0.3 ms of CPU (wake-up, GIL, procfs read): at 1 ms the
watcher alone took 7.6% of a core (with the main thread asleep); at 20 ms 1.7%. A 135M update's
activation peak lasts far longer than 20 ms; the tiny default's shortest ones may be missed."""
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """This process's resident set size now (Linux), or its lifetime peak where /proc is missing."""
    try:
        return int(STATM.read_text().split()[1]) * PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


class PeakMemory:
    """`with PeakMemory(device) as peak: ...` then `peak.mb`: see the module docstring for what it measures."""

    def __init__(self, device: torch.device, interval_s: float = POLL_S) -> None:
        self.device = torch.device(device)
        self.interval_s = interval_s
        self.mb = 0.0
        self._start = 0
        self._high = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            return self
        self._start = self._high = resident_bytes()
        self._thread = threading.Thread(target=self._watch, name="teamrl-peak-rss", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._high = max(self._high, resident_bytes())

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.device.type == "cuda":
            self.mb = torch.cuda.max_memory_allocated(self.device) / 2**20
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._high = max(self._high, resident_bytes())
        self.mb = (self._high - self._start) / 2**20
