"""The tiny quickstart at two commits, side by side: is this checkout's default training step slower?

    python -m benchmarks run quickstart_commits --base f32d4f8            # 3 rounds
    python -m benchmarks run quickstart_commits --base f32d4f8 --rounds 1 train.steps=2   # a quick check

The base commit is exported with `git archive` into a temporary folder (nothing is written to this
repository or its worktrees); this checkout is the other side. Each side runs
`teamrl quickstart output_dir=TMP train.threads=1 OVERRIDES` from its own source tree (PYTHONPATH), one
torch thread, in alternating order from round to round, after one untimed run each (which warms the tiny
default and fills each side's caches). Reported per side: the training seconds the run itself measured
(`summary.json`'s train_seconds: steps and the evaluations between them), the child's wall seconds and its
CPU seconds (process and descendants), medians over rounds; and the ratio base / this checkout within each
round, then its median (above 1: this checkout is faster). The held-out success of each side is printed too:
the two commits need not train alike, and a difference there is a change of behaviour, not of speed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from statistics import median

from benchmarks.harness import ROOT, Lines, add_out_argument


def export(commit: str, into: Path) -> Path:
    """The tree of `commit` as files under `into` (git archive, read from this repository)."""
    archive = into / "base.tar"
    with archive.open("wb") as handle:
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit], stdout=handle, check=True)
    tree = into / "base"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_side(tree: Path, out: Path, overrides: list[str], commit: str) -> dict[str, float]:
    """One quickstart from `tree`'s sources: its train seconds, wall, CPU seconds and held-out successes."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(tree / "src"), "TEAMRL_COMMIT": commit}
    args = [sys.executable, "-m", "teamrl.cli", "quickstart", f"output_dir={out}", "run_name=run",
            "train.threads=1", *overrides]
    cpu, wall = _children_cpu_s(), time.time()
    done = subprocess.run(args, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"quickstart failed in {tree}:\n{done.stderr[-3000:]}")
    summary = json.loads((out / "run" / "summary.json").read_text())
    return {"train_s": summary["train_seconds"], "wall_s": time.time() - wall, "cpu_s": _children_cpu_s() - cpu,
            "initial": summary["initial_success"], "final": summary["final_success"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare with (e.g. the last release)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("overrides", nargs="*", help="dotted overrides for both sides (e.g. train.steps=2)")
    add_out_argument(parser, "quickstart_commits")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    report = Lines.started()
    with tempfile.TemporaryDirectory(prefix="teamrl-commits-") as tmp:
        base_commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.base],
                                     capture_output=True, text=True, check=True).stdout.strip()
        sides = {f"base {base_commit}": (export(args.base, Path(tmp)), base_commit), "this checkout": (ROOT, "")}
        report(f"sides: {', '.join(sides)}; overrides: {' '.join(args.overrides) or '(none)'}")
        for name, (tree, commit) in sides.items():  # untimed: warms the tiny default and each side's caches
            run_side(tree, Path(tmp) / "warm" / name.replace(" ", "-"), args.overrides, commit)
        rounds: list[dict[str, dict[str, float]]] = []
        for index in range(args.rounds):
            order = list(sides) if index % 2 == 0 else list(reversed(sides))
            results = {}
            for name in order:
                tree, commit = sides[name]
                results[name] = run_side(tree, Path(tmp) / f"r{index}" / name.replace(" ", "-"), args.overrides,
                                         commit)
            rounds.append(results)
            report(f"round {index + 1} ({' then '.join(order)}): " + "; ".join(
                f"{name} train {r['train_s']:.1f} s, wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, "
                f"held-out {r['initial']:.3f} -> {r['final']:.3f}" for name, r in results.items()))
    base, this = list(sides)
    figures: dict[str, float] = {}
    for key in ("train_s", "wall_s", "cpu_s"):
        ratios = [r[base][key] / r[this][key] for r in rounds]
        figures[f"{key}_ratio"] = median(ratios)
        report(f"- {key}: {base} {median(r[base][key] for r in rounds):.1f}, this checkout "
               f"{median(r[this][key] for r in rounds):.1f}; base / this {median(ratios):.3f}x "
               f"(rounds {', '.join(f'{x:.3f}' for x in ratios)})")
    report.finish(args.out, figures)


if __name__ == "__main__":
    main()
