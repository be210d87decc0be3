"""Programs per second through the sandbox versus a fresh `python -c` per program.

Three workloads, each run through `Sandbox.run_many` / `run_tests_many` and through a baseline
that calls `subprocess.run([sys.executable, "-c", code])` from as many threads as the sandbox
has workers (so both use the same parallelism):

* trivial: `print(1)`
* bfs: a ~40-line grid BFS helper followed by one `print(bfs(...))` call (the planning workload)
* humaneval: the 164 HumanEval canonical solutions graded against their tests (the baseline
  runs prompt + solution + tests + `check(entry_point)` in one fresh interpreter)
* units: the bfs program against three model-style asserts through `run_untrusted_tests` (the
  code team's unit-test cross-check; the baseline runs program + asserts in one interpreter)

    python -m benchmarks run sandbox_throughput [--workers 2] [-n 256]

`--compare DIR` also runs every workload through another copy of the sandbox package (e.g. an
older revision: `git archive <rev> src/teamrl/sandbox | tar -x -C /tmp/old`, then
`--compare /tmp/old/src/teamrl/sandbox`), interleaved with the current one in the same run, so
both see the same machine load; `--repeat R` times each workload R times per sandbox (alternating)
and reports the fastest. `--skip-baseline` leaves out the fresh-interpreter baseline.
`--os-isolation off` times the in-process fallback layer (audit hook and allow-list wrappers)
instead of the namespaces; `userns` the unprivileged user-namespace path.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import teamrl.sandbox as current_sandbox
from teamrl.tasks.code_data import load_humaneval

from benchmarks.harness import add_out_argument, printed_report

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


UNIT_STEPS = [("assert bfs(GRID, (0, 0), (0, 0)) == 0", True), ("assert bfs(GRID, (0, 0), (4, 6)) > 0", True),
              ("assert path_exists(GRID, (0, 0), (2, 2))", True)]


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


def load_sandbox_package(directory: str) -> ModuleType:
    """Import the sandbox package in `directory` under a name of its own (next to teamrl.sandbox)."""
    init = Path(directory) / "__init__.py"
    if not init.is_file():
        raise SystemExit(f"--compare {directory}: no __init__.py there; give the sandbox package directory")
    name = "sandbox_compare"
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def row(name: str, label: str, count: int, sandbox_s: float, baseline_s: float | None, ok: int) -> None:
    base = f"{count / baseline_s:>17.1f} {baseline_s / sandbox_s:>8.1f}x" if baseline_s else f"{'-':>17} {'-':>9}"
    print(f"{name:<11} {label:<8} {count:>5} {count / sandbox_s:>14.1f} {base} {1000 * sandbox_s / count:>9.2f} ms"
          f"   ({ok}/{count} ok)")


def timed(repeat: int, fn: Any, *args: Any) -> tuple[float, Any]:
    """(fastest of `repeat` runs in seconds, the last run's output)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-n", type=int, default=256, help="programs per trivial / bfs workload")
    parser.add_argument("--skip-humaneval", action="store_true")
    parser.add_argument("--skip-baseline", action="store_true", help="no fresh-interpreter baseline")
    parser.add_argument("--compare", metavar="DIR", help="another sandbox package directory to time alongside")
    parser.add_argument("--repeat", type=int, default=1, help="runs per workload and sandbox; the fastest counts")
    parser.add_argument("--os-isolation", choices=["auto", "off", "userns"], default="auto",
                        help="Sandbox(os_isolation=...): auto (namespaces where possible), off (guards only), userns")
    add_out_argument(parser, "sandbox_throughput")
    args = parser.parse_args()
    with printed_report(args.out):
        return measure(args)


def measure(args: argparse.Namespace) -> int:
    packages: list[tuple[str, Any]] = [("current", current_sandbox)]
    if args.compare:
        packages.append(("compare", load_sandbox_package(args.compare)))
    workloads = [("trivial", ["print(1)"] * args.n), ("bfs", bfs_programs(args.n))]
    boxes = []
    for label, package in packages:
        limits = package.SandboxLimits(wall_time_s=10.0, cpu_time_s=10.0)
        isolation = {"auto": True, "off": False, "userns": "userns"}[args.os_isolation]
        box = package.Sandbox(limits, workers=args.workers, os_isolation=isolation)
        iso = box.isolation
        print(f"{label}: workers={args.workers} cpus={os.cpu_count()} network={iso['network']} "
              f"filesystem={iso['filesystem']} sandbox_uid={iso['sandbox_uid']} "
              f"pid_namespace={iso.get('pid_namespace', False)}")
        box.run_many(["print(1)"] * (4 * args.workers))  # warm the workers
        boxes.append((label, box))
    try:
        print(f"{'workload':<11} {'sandbox':<8} {'n':>5} {'sandbox prog/s':>14} {'subprocess prog/s':>17} "
              f"{'speedup':>9} {'per prog':>9}")
        for name, codes in workloads:
            base_s = None if args.skip_baseline else baseline(codes, args.workers)
            for label, box in boxes:
                elapsed, results = timed(args.repeat, box.run_many, codes)
                row(name, label, len(codes), elapsed, base_s, sum(r.ok for r in results))
        unit_jobs = [(code, UNIT_STEPS) for code in bfs_programs(args.n)]
        codes = [code + "".join(f"{src}\n" for src, _ in UNIT_STEPS) for code, _ in unit_jobs]
        base_s = None if args.skip_baseline else baseline(codes, args.workers)
        for label, box in boxes:
            if not hasattr(box, "run_untrusted_tests_many"):
                print(f"{'units':<11} {label:<8} (this sandbox has no run_untrusted_tests)")
                continue
            elapsed, graded = timed(args.repeat, box.run_untrusted_tests_many, unit_jobs)
            row("units", label, len(unit_jobs), elapsed, base_s, sum(r.all_passed for r in graded))
        if not args.skip_humaneval:
            problems = load_humaneval()
            jobs = [{"program": p.reference_solution, "tests": p.tests, "entry_point": p.entry_point,
                     "setup": p.test_setup} for p in problems]
            codes = [f"{p.reference_solution}\n{p.tests}\ncheck({p.entry_point})\n" for p in problems]
            base_s = None if args.skip_baseline else baseline(codes, args.workers)
            for label, box in boxes:
                elapsed, graded = timed(args.repeat, box.run_tests_many, jobs)
                row("humaneval", label, len(jobs), elapsed, base_s, sum(r.all_passed for r in graded))
    finally:
        for _, box in boxes:
            box.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
