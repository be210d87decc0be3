"""The tool-using gateway team (examples/gateway/tool_team.yaml) on SmolLM2-135M-Instruct: before/after
held-out success per seed, and how much of it is format (a call the tool can run) and how much skill
(the right expression, and a right final answer among valid calls).

Run (one seed after another, one thread each; results are written after every seed):
    python -m scripts.study.tool_team --seeds 0 1 2 --output benchmarks/results/tool_team
    python -m scripts.study.tool_team --table benchmarks/results/tool_team   # the table again

Per seed: `teamrl eval` of the untrained team, `teamrl train`, `teamrl eval` of the final checkpoint, each
held-out (split heldout, the first --instances instances) and sampled at the config's eval_temperature.
The tool metrics are read from each evaluation's transcripts (episodes.jsonl): the solver's first answer
is parsed with the gateway's own `hermes` parser and the call run with the example's tool.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("tool_task", ROOT / "examples" / "gateway" / "tool_task.py")
assert _spec is not None and _spec.loader is not None
tool_task = importlib.util.module_from_spec(_spec)
sys.modules["tool_task"] = tool_task
_spec.loader.exec_module(tool_task)
instances, last_number, run_tool = tool_task.instances, tool_task.last_number, tool_task.run_tool

CONFIG = "examples/gateway/tool_team.yaml"


def tool_metrics(episodes_file: Path) -> dict[str, float]:
    """Held-out success and the solver's tool use over one evaluation's episodes.

    valid: the solver's first answer held a `calculate` call the gateway parsed and the tool could run;
    right_expr: that call's value is the true answer; the `..._given_...` shares are among those episodes;
    solver_right: the solver's own final number is the true value; checker_rescued / checker_spoiled: the
    team's answer is right though the solver's was not / wrong though the solver's was right."""
    from teamrl.gateway.tool_calls import parse_hermes

    rows = [json.loads(line) for line in episodes_file.read_text().splitlines()]
    n = valid = right = solved = solved_valid = solved_right = accepts = corrects = 0
    solver_right = rescued = spoiled = 0
    for row in rows:
        truth = instances("heldout", row["instance"])["answer"]
        solver = [t for t in row["transcript"] if t["agent"] == "solver"]
        checker = [t for t in row["transcript"] if t["agent"] == "checker"]
        parsed = parse_hermes(solver[0]["text"]) if solver else None
        # the program sends the result back (a second solver call) only when the gateway returned tool_calls
        called = len(solver) == 2 and parsed is not None and parsed.calls and parsed.calls[0]["name"] == "calculate"
        value = run_tool(json.dumps(parsed.calls[0]["arguments"]))[1] if called else None
        n += 1
        valid += value is not None
        right += value == truth
        solved += row["success"]
        solved_valid += row["success"] and value is not None
        solved_right += row["success"] and value == truth
        own = last_number(solver[-1]["text"]) == truth if solver else False
        solver_right += own
        rescued += row["success"] and not own
        spoiled += own and not row["success"]
        reply = (checker[-1]["text"] or "").upper() if checker else ""
        accepts += "ACCEPT" in reply
        corrects += any(ch.isdigit() for ch in reply)
    return {"instances": n, "success": solved / n, "valid_call": valid / n, "right_expression": right / n,
            "success_given_valid": solved_valid / valid if valid else float("nan"),
            "success_given_right": solved_right / right if right else float("nan"),
            "checker_accept": accepts / n, "checker_number": corrects / n, "solver_right": solver_right / n,
            "checker_rescued": rescued / n, "checker_spoiled": spoiled / n}


def run(command: list[str], log: Path) -> float:
    """Run a teamrl command, its output to `log`; the wall seconds it took."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
    start = time.time()
    with open(log, "w") as handle:
        subprocess.run([sys.executable, "-m", "teamrl.cli", *command], cwd=ROOT, env=env, stdout=handle,
                       stderr=subprocess.STDOUT, check=True)
    return time.time() - start


def provenance() -> dict[str, str]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(
        ["lscpu"], capture_output=True, text=True).stdout.splitlines() if line.startswith("Model name")), "unknown")
    return {"commit": commit.stdout.strip() + ("+dirty" if dirty else ""), "cpu": cpu, "cores": str(os.cpu_count())}


def one_seed(seed: int, output: Path, instances_n: int, overrides: list[str]) -> dict:
    work = output / f"seed{seed}"
    work.mkdir(parents=True, exist_ok=True)
    common = [f"seed={seed}", "train.threads=1", *overrides]
    load_before, started = os.getloadavg()[0], provenance()  # the code the seed runs: recorded before it runs
    before_s = run(["eval", CONFIG, *common, "--instances", str(instances_n), "--out", str(work / "before")],
                   work / "eval_before.log")
    train_s = run(["train", CONFIG, *common, f"output_dir={work / 'runs'}"], work / "train.log")
    run_dir = next((work / "runs").iterdir())
    after_s = run(["eval", CONFIG, *common, "--checkpoint", str(run_dir / "checkpoints" / "final"),
                   "--instances", str(instances_n), "--out", str(work / "after")], work / "eval_after.log")
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_success = [r["train/success"] for r in steps if "train/success" in r]
    return {"seed": seed, "overrides": common, "run_dir": str(run_dir.relative_to(ROOT)) if run_dir.is_relative_to(
        ROOT) else str(run_dir), "before": tool_metrics(work / "before" / "episodes.jsonl"),
        "after": tool_metrics(work / "after" / "episodes.jsonl"), "train_success_first_last": [
            train_success[0], train_success[-1]] if train_success else None,
        "train_success_mean": sum(train_success) / len(train_success) if train_success else None,
        "wall_s": {"eval_before": round(before_s), "train": round(train_s), "eval_after": round(after_s)},
        "load_1min_at_start": round(load_before, 1), "load_1min_at_end": round(os.getloadavg()[0], 1),
        "provenance": started}


def table(rows: list[dict]) -> str:
    """Per seed: before -> after for success, valid calls, right expressions, success among valid calls, the
    solver's own answer right; the checker's rescues and spoils after training; train wall and load."""
    def pct(v: float) -> str:
        return "-" if v != v else f"{v:.0%}"  # nan: no valid call

    def pair(r: dict, key: str) -> str:
        return f"{pct(r['before'][key])} -> {pct(r['after'][key])}"

    head = ("| seed | held-out success | valid call (format) | right expression (skill) | success among valid calls | "
            "solver's own answer right | checker rescued / spoiled (after) | train wall | load 1 min (start, end) |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    lines = [
        f"| {r['seed']} | {pair(r, 'success')} | {pair(r, 'valid_call')} | {pair(r, 'right_expression')} | "
        f"{pair(r, 'success_given_valid')} | {pair(r, 'solver_right') if 'solver_right' in r['after'] else '-'} | "
        f"{pct(r['after'].get('checker_rescued', float('nan')))} / {pct(r['after'].get('checker_spoiled', float('nan')))} | "
        f"{r['wall_s']['train'] / 60:.1f} min | {r['load_1min_at_start']}, {r['load_1min_at_end']} |"
        for r in rows]
    return head + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "tool_team")
    parser.add_argument("--instances", type=int, default=64, help="held-out instances per evaluation")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "tool_team", help="runs and eval folders")
    parser.add_argument("--table", type=Path, help="print the table of this results folder and stop")
    parser.add_argument("--recompute", action="store_true",
                        help="read the metrics again from the --work folders' transcripts into --output, and stop")
    parser.add_argument("overrides", nargs="*", help="config overrides for every run")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads((args.table / "results.json").read_text())["seeds"]))
        return
    args.output.mkdir(parents=True, exist_ok=True)
    results_file = args.output / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {"seeds": []}
    if args.recompute:
        for row in results["seeds"]:
            for when in ("before", "after"):
                row[when] = tool_metrics(args.work / f"seed{row['seed']}" / when / "episodes.jsonl")
        results_file.write_text(json.dumps(results, indent=2) + "\n")
        (args.output / "table.md").write_text(table(sorted(results["seeds"], key=lambda r: r["seed"])))
        return
    for seed in args.seeds:
        row = one_seed(seed, args.work, args.instances, args.overrides)
        results["seeds"] = [r for r in results["seeds"] if r["seed"] != seed] + [row]
        results["command"] = "python -m scripts.study.tool_team " + " ".join(sys.argv[1:])
        results_file.write_text(json.dumps(results, indent=2) + "\n")
        (args.output / "table.md").write_text(table(sorted(results["seeds"], key=lambda r: r["seed"])))
        print(table([row]), flush=True)


if __name__ == "__main__":
    main()
