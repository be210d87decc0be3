"""Programs per second through the sandbox versus a fresh `python -c` per program.

Three workloads, each run through `Sandbox.run_many` / `run_tests_many` and through a baseline
that calls `subprocess.run([sys.executable, "-c", code])` from as many threads as the sandbox
has workers (so both use the same parallelism):

* trivial: `print(1)`
* bfs: a ~40-line grid BFS helper followed by one `print(bfs(...))` call (the planning workload)
* humaneval: the 164 HumanEval canonical solutions graded against their tests (the baseline
  runs prompt + solution + tests + `check(entry_point)` in one fresh interpreter)

    PYTHONPATH=src python benchmarks/sandbox_throughput.py [--workers 2] [-n 256]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

try:
    from teamrl.sandbox import Sandbox, SandboxLimits
    from teamrl.tasks.code_data import load_humaneval
except ImportError:  # run from a source checkout without PYTHONPATH=src
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from teamrl.sandbox import Sandbox, SandboxLimits
    from teamrl.tasks.code_data import load_humaneval

BFS_PREAMBLE = '''
from collections import deque

GRID = [
    "..#....",
    ".##.##.",
    "...#...",
    ".#...#.",
    "...#...",
]


def neighbours(grid, cell):
    rows, cols = len(grid), len(grid[0])
    r, c = cell
    for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        nr, nc = r + dr, c + dc
        if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] != "#":
            yield (nr, nc)


def bfs(grid, start, goal):
    """Length of the shortest path from start to goal, or -1."""
    queue = deque([start])
    dist = {start: 0}
    while queue:
        cell = queue.popleft()
        if cell == goal:
            return dist[cell]
        for nxt in neighbours(grid, cell):
            if nxt not in dist:
                dist[nxt] = dist[cell] + 1
                queue.append(nxt)
    return -1


def path_exists(grid, start, goal):
    return bfs(grid, start, goal) >= 0
'''


def bfs_programs(n: int) -> list[str]:
    goals = [(r, c) for r in range(5) for c in range(7)]
    return [BFS_PREAMBLE + f"print(bfs(GRID, (0, 0), {goals[i % len(goals)]}))\n" for i in range(n)]


def baseline(codes: list[str], workers: int) -> float:
    """Seconds to run every code string in a fresh interpreter (`workers` at a time)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def one(code: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, env=env)

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, codes))
    elapsed = time.perf_counter() - start
    failed = sum(r.returncode != 0 for r in results)
    if failed:
        print(f"  (baseline: {failed} of {len(codes)} programs failed)")
    return elapsed


def row(name: str, count: int, sandbox_s: float, baseline_s: float, ok: int) -> None:
    print(f"{name:<11} {count:>5} {count / sandbox_s:>14.1f} {count / baseline_s:>17.1f} "
          f"{baseline_s / sandbox_s:>8.1f}x {1000 * sandbox_s / count:>9.2f} ms   ({ok}/{count} ok)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-n", type=int, default=256, help="programs per trivial / bfs workload")
    parser.add_argument("--skip-humaneval", action="store_true")
    args = parser.parse_args()
    workloads = [("trivial", ["print(1)"] * args.n), ("bfs", bfs_programs(args.n))]
    limits = SandboxLimits(wall_time_s=10.0, cpu_time_s=10.0)
    with Sandbox(limits, workers=args.workers) as box:
        iso = box.isolation
        print(f"workers={args.workers} cpus={os.cpu_count()} network={iso['network']} "
              f"filesystem={iso['filesystem']} sandbox_uid={iso['sandbox_uid']}")
        print(f"{'workload':<11} {'n':>5} {'sandbox prog/s':>14} {'subprocess prog/s':>17} {'speedup':>9} "
              f"{'per prog':>9}")
        box.run_many(["print(1)"] * (4 * args.workers))  # warm the workers
        for name, codes in workloads:
            start = time.perf_counter()
            results = box.run_many(codes)
            sandbox_s = time.perf_counter() - start
            row(name, len(codes), sandbox_s, baseline(codes, args.workers), sum(r.ok for r in results))
        if not args.skip_humaneval:
            problems = load_humaneval()
            jobs = [{"program": p.reference_solution, "tests": p.tests, "entry_point": p.entry_point,
                     "setup": p.test_setup} for p in problems]
            start = time.perf_counter()
            graded = box.run_tests_many(jobs)
            sandbox_s = time.perf_counter() - start
            codes = [f"{p.reference_solution}\n{p.tests}\ncheck({p.entry_point})\n" for p in problems]
            row("humaneval", len(jobs), sandbox_s, baseline(codes, args.workers), sum(r.all_passed for r in graded))
    return 0


if __name__ == "__main__":
    sys.exit(main())
