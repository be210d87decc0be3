"""Per-domain study: the untrained tiny team vs the same team after AT-GRPO, on held-out instances.

Run: python -m scripts.study.domain_study DOMAIN [--steps N] [--seed 0] [--warmup-steps N] [--set key=value ...]
DOMAIN is a config in src/teamrl/configs (plan_path, sokoban, sudoku, math, code: <domain>_team.yaml)
or a path to a YAML config. The tiny default model is warmed up on the task's scripted demos for
`policy.warmup_sft_steps` steps (cached), the untrained single agent is scored as a reference, then the
team is trained with the config's AT-GRPO settings; the loop scores the untrained team first (step 0)
and the trained team last. Writes benchmarks/results/domain_study/<host>/<domain>_study.json and .txt: held-out success
(greedy) and mean held-out team return, before / after / best, with the command and wall times.
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

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "src" / "teamrl" / "configs"


def config_path(domain: str) -> Path:
    """`sokoban` -> src/teamrl/configs/sokoban_team.yaml; an existing file path is used as is."""
    path = Path(domain)
    if path.suffix in (".yaml", ".yml"):
        if not path.exists():
            raise SystemExit(f"config file {path} does not exist")
        return path
    path = CONFIGS / f"{domain}_team.yaml"
    if not path.exists():
        known = sorted(p.name.removesuffix("_team.yaml") for p in CONFIGS.glob("*_team.yaml"))
        raise SystemExit(f"no config for domain {domain!r}; known: {', '.join(known)} (or give a .yaml path)")
    return path


def eval_history(run_dir: Path) -> list[dict[str, float]]:
    """The held-out evaluations logged by a run, in order (step, success, team return)."""
    rows = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "eval/success" in record:
            rows.append({"step": record["step"], "success": record["eval/success"],
                         "team_return": record["eval/team_return"]})
    return rows


def study(domain: str, overrides: list[str]) -> dict:
    path = config_path(domain)
    started = time.time()
    model = resolve_model_path(load_config(path, overrides))
    warmup_s = time.time() - started
    print(f"warm-up ready after {warmup_s:.0f}s: {model}", flush=True)

    single_cfg = load_config(path, overrides + ["workflow.name=single"])
    workflow = build_workflow(single_cfg)
    policies, mapping = build_policies(single_cfg, workflow, model)
    single, _ = evaluate(workflow, policies, mapping, single_cfg.train.eval_instances, 0.0,
                         single_cfg.rollout.max_new_tokens, single_cfg.seed)
    if hasattr(workflow, "close"):
        workflow.close()
    print(f"untrained single agent: {single}", flush=True)

    config = load_config(path, overrides + [f"run_name={Path(path).stem}-s{single_cfg.seed}-{int(time.time())}"])
    run_dir = train(config, model_path=model, progress=False)
    summary = json.loads((run_dir / "summary.json").read_text())
    history = eval_history(run_dir)
    best = max(history, key=lambda r: (r["success"], r["team_return"]))
    return {
        "domain": domain, "config": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
        "overrides": overrides, "warmup_steps": config.policy.warmup_sft_steps, "task": config.task,
        "seed": config.seed, "steps": summary["steps"],
        "heldout_instances": config.train.eval_instances, "model": model, "warmup_seconds": warmup_s,
        "train_seconds": summary["train_seconds"], "run_dir": str(run_dir),
        "untrained_single": {"success": single["success"], "team_return": single["team_return"]},
        "untrained_team": history[0], "trained_team": history[-1], "best": best,
        "evaluations": history,
    }


def report(result: dict, command: str) -> str:
    rows = [("untrained single", result["untrained_single"]), ("untrained team", result["untrained_team"]),
            ("trained team", result["trained_team"]), (f"best (step {result['best']['step']})", result["best"])]
    lines = [f"$ {command}",
             f"{result['domain']}: {result['task']}, tiny default model, seed {result['seed']}, "
             f"{result['steps']} AT-GRPO steps, held-out greedy, {result['heldout_instances']} instances",
             f"warm-up {result['warmup_steps']} steps, {result['warmup_seconds']:.0f}s (0 = cached), "
             f"training {result['train_seconds']:.0f}s",
             f"{'':20s} {'success':>8s} {'team return':>12s}"]
    lines += [f"{name:20s} {r['success']:8.1%} {r['team_return']:12.3f}" for name, r in rows]
    lines.append("evaluations: " + ", ".join(f"{r['step']}:{r['success']:.1%}" for r in result["evaluations"]))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("domain", help="plan_path, sokoban, sudoku, math, code, or a config .yaml path")
    parser.add_argument("--steps", type=int, default=0, help="training steps (default: the config's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup-steps", type=int, default=0,
                        help="SFT steps of the tiny default's warm-up (default: the config's policy.warmup_sft_steps)")
    parser.add_argument("--output-dir", default="runs/domain-study")
    parser.add_argument("--out", default="", help="result stem (default benchmarks/results/domain_study/<host>/<domain>_study)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="more config overrides")
    args = parser.parse_args()

    overrides = [f"seed={args.seed}", f"output_dir={args.output_dir}", *args.set]
    if args.steps:
        overrides.append(f"train.steps={args.steps}")
    if args.warmup_steps:
        overrides.append(f"policy.warmup_sft_steps={args.warmup_steps}")
    result = study(args.domain, overrides)
    result["provenance"] = provenance()
    text = report(result, result["provenance"]["command"])
    print("\n" + text)
    stem = Path(args.out or default_out("domain_study", f"{Path(args.domain).stem}_study").with_suffix(""))
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str))
    stem.with_suffix(".txt").write_text(text)


if __name__ == "__main__":
    main()
