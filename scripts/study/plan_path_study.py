"""The default study: untrained team vs AT-GRPO (shared, per-role) vs single-agent GRPO vs
trajectory-level GRPO vs SFT on the team's own successes, on Plan-Path with the tiny default model,
same steps and samples.

Run: python -m scripts.study.plan_path_study [--steps 60] [--out PATH (default benchmarks/results/plan_path_study/<host>/plan_path_study.json)]
Every run starts from the same warmed-up tiny model (`teamrl warmup` first, or it is built here).
Prints one row per run: held-out success (greedy, 200 instances) before / after / best, and wall time.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.harness import default_out, provenance
from teamrl.config import load_config
from teamrl.setup.team import build_policies, build_workflow, resolve_model_path
from teamrl.rollout.evaluation import evaluate
from teamrl.training.loop import train

CONFIG = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs" / "plan_path_team.yaml"

RUNS = {
    "at-grpo shared": ["regime=shared"],
    "at-grpo per-role": ["regime=per_role"],
    "single-agent grpo": ["workflow.name=single"],
    "trajectory grpo": ["algorithm.grouping=trajectory"],
    # The SFT baseline: fine-tune the team on its own successful episodes (same rollouts as trajectory GRPO).
    "sft on successes": ["algorithm.grouping=trajectory", "algorithm.objective=rft"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=list(RUNS), help=f"subset of {list(RUNS)}")
    parser.add_argument("--output-dir", default="runs/study")
    parser.add_argument("--out", default=str(default_out("plan_path_study")), help="the results as JSON (default: %(default)s)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides for every run, e.g. task.size=7")
    args = parser.parse_args()

    base = [f"seed={args.seed}", f"train.steps={args.steps}", f"output_dir={args.output_dir}", *args.set]
    started = time.time()
    model = resolve_model_path(load_config(CONFIG, base))
    print(f"warm-up ready after {time.time() - started:.0f}s: {model}")
    results = []
    for workflow in ("team", "single"):
        config = load_config(CONFIG, base + [f"workflow.name={workflow}"])
        wf = build_workflow(config)
        policies, mapping = build_policies(config, wf, model)
        t0 = time.time()
        metrics, _ = evaluate(wf, policies, mapping, config.train.eval_instances, 0.0,
                              config.rollout.max_new_tokens, config.seed)
        results.append({"run": f"untrained {workflow}", "initial": metrics["success"],
                        "final": metrics["success"], "best": metrics["success"], "steps": 0,
                        "train_seconds": 0.0, "eval_seconds": time.time() - t0})
        print(results[-1], flush=True)
    for name in args.only:
        stamp = name.replace(" ", "-")
        config = load_config(CONFIG, base + RUNS[name] + [f"run_name={stamp}-s{args.seed}-{int(time.time())}"])
        run_dir = train(config, model_path=model, progress=False)
        summary = json.loads((run_dir / "summary.json").read_text())
        results.append({"run": name, "initial": summary["initial_success"], "final": summary["final_success"],
                        "best": summary["best_success"], "steps": summary["steps"],
                        "train_seconds": summary["train_seconds"], "run_dir": str(run_dir)})
        print(results[-1], flush=True)
    size = load_config(CONFIG, base).task_settings().size
    print(f"\nPlan-Path {size}x{size}, "
          f"tiny default model, seed {args.seed}, {args.steps} steps, held-out success (greedy, 200 instances)")
    print(f"{'run':22s} {'before':>7s} {'after':>7s} {'best':>7s} {'train s':>8s}")
    for r in results:
        print(f"{r['run']:22s} {r['initial']:7.1%} {r['final']:7.1%} {r['best']:7.1%} {r['train_seconds']:8.0f}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"provenance": provenance(), "runs": results}, indent=2))


if __name__ == "__main__":
    main()
