"""This machine's measured fp32 matmul peak, for "share of the hardware" figures.

A benchmark that reports a phase as a % of peak measures the peak in the same run, with the same
thread count, right before or between its own repeats: on a shared machine a peak measured in
another run (or taken from a data sheet) says nothing about the load the phase ran under.

The peak is the best of several timed square matmuls (best, not median: the peak is what the
core can do when nothing steals it; the phase's own figure is a median over repeats, so the share
errs low, never high). FLOPs of an (m x k) @ (k x n) product: 2 m k n.

    python -m benchmarks run matmul_peak --threads 1
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from benchmarks.harness import Lines, add_out_argument


def matmul_flops(m: int, k: int, n: int) -> float:
    """Floating-point operations of an (m x k) @ (k x n) product (a multiply and an add each)."""
    return 2.0 * m * k * n


def measure_matmul_peak(size: int = 1024, repeats: int = 7, dtype: torch.dtype = torch.float32,
                        clock: Callable[[], float] = time.perf_counter, backend: str = "torch") -> float:
    """Best GFLOP/s of `repeats` timed (size x size) @ (size x size) matmuls at the current thread count.

    clock: wall time by default; `time.process_time` gives the peak in CPU time (for a phase timed in
    CPU time, which on a shared machine does not count the time other processes held the core).
    backend: torch (`torch.mm`: MKL on x86 CPUs) or onednn (oneDNN's linear op, `policy.cpu_linear: onednn`;
    2.14x MKL's fp32 rate on an AMD CPU with AVX-512, 0.82x on an AVX2-only one).
    """
    if backend not in ("torch", "onednn"):
        raise ValueError(f"backend must be torch or onednn, got {backend!r}")
    if size < 16 or repeats < 1:
        raise ValueError(f"size must be >= 16 and repeats >= 1, got size={size}, repeats={repeats}")
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(dtype)
    b = torch.randn(size, size, generator=generator).to(dtype)
    out = torch.empty(size, size, dtype=dtype)

    def run() -> None:
        if backend == "torch":
            torch.mm(a, b, out=out)
        else:
            torch.ops.mkldnn._linear_pointwise(a, b, None, "none", [], "")  # a @ b^T: the same FLOPs

    run()  # warm-up: first call pays for allocation and kernel selection
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        run()
        best = min(best, clock() - start)
    return matmul_flops(size, size, size) / best / 1e9


def share_of_peak(flops: float, seconds: float, peak_gflops: float) -> float:
    """Fraction of the peak that `flops` done in `seconds` reached (0.25 = 25%)."""
    if seconds <= 0 or peak_gflops <= 0:
        raise ValueError(f"seconds and peak must be positive, got {seconds}, {peak_gflops}")
    return flops / seconds / 1e9 / peak_gflops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--size", type=int, default=1024)
    add_out_argument(parser, "matmul_peak")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = Lines.started()
    figures: dict[str, float] = {}
    figures["fp32_gflops"] = measure_matmul_peak(args.size)
    out(f"fp32 matmul peak, {args.threads} thread(s), {args.size}^3: {figures['fp32_gflops']:.1f} GFLOP/s")
    from teamrl.policies.cpu_linear import onednn_available
    if onednn_available():
        onednn = figures["fp32_onednn_gflops"] = measure_matmul_peak(args.size, backend="onednn")
        out(f"fp32 matmul peak through oneDNN, {args.threads} thread(s), {args.size}^3: {onednn:.1f} GFLOP/s")
    if torch.backends.mkldnn.is_available():
        try:
            bf16 = figures["bf16_gflops"] = measure_matmul_peak(args.size, dtype=torch.bfloat16)
            out(f"bf16 matmul peak, {args.threads} thread(s), {args.size}^3: {bf16:.1f} GFLOP/s")
        except RuntimeError as err:  # a CPU without bf16 matmul kernels
            out(f"bf16 matmul: not supported here ({err})")
    out.finish(args.out, figures)


if __name__ == "__main__":
    main()
