"""Keeping the memory a step frees for the next step (glibc's malloc on CPU), instead of faulting it in again.

Why: glibc's malloc serves an allocation above its mmap threshold (128 KiB, rising by itself to at most
32 MiB) with a fresh `mmap` and gives it back to the OS when freed; it also trims the top of its heap.
A CPU training step allocates and frees the same large tensors every step (a 135M model's vocabulary-wide
gradients are 113 MB each, activations and gradients hundreds of MB in all), so every step faults all of
those pages in again and the kernel zeroes each one. On this project's 2-core VM a page fault costs a few
microseconds: a 135M full fine-tuning update (forward, backward, AdamW) took 250-380 thousand faults per
step, and without them it ran 1.28x faster (`benchmarks/freed_memory.py`).

`keep_freed_memory()` raises the mmap threshold to 1 GiB (tensors up to that come from the heap and go back
to it) and turns heap trimming off, for the rest of the process. The price: the process's resident set
stays at its highest point instead of shrinking between steps. Reuse is not total:
a step now and then still maps a large tensor afresh (a lone 64 MiB tensor freed and allocated again
grew the heap by another 64 MiB in most rounds, seen with strace; torch's 64-byte-aligned requests need
a free block with room for the alignment slack, which a block of just the tensor's size lacks).
Only glibc has `mallopt`; elsewhere (macOS, musl) nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
HEAP_UP_TO = 1 << 30
"""Allocations up to this size come from malloc's heap (reused); larger ones keep their own mapping."""
NEVER_TRIM = (1 << 31) - 1
"""mallopt takes an int: the largest trim threshold it can be given (2 GiB of free heap top before a trim)."""


@functools.lru_cache(maxsize=1)
def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") else None


def keep_freed_memory() -> bool:
    """Make glibc's malloc keep freed memory for reuse (see the module docstring); whether it applied."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, HEAP_UP_TO)) and bool(libc.mallopt(M_TRIM_THRESHOLD, NEVER_TRIM))
