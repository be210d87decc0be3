"""Split-Calc trained both ways on the same seeds: the built-in team (src/teamrl/configs/split_calc_team.yaml)
and the same team written as an openai-client program trained through the gateway
(examples/gateway/split_calc_program.yaml).

Both ways start from the same weights: the built-in config's warmed-up tiny default model (cached in
~/.cache/teamrl after the first warm-up), handed to both runs as the model of `policy.model: tiny-default`.
Each run's held-out learning curve (every evaluation's success and instance count), its final numbers and
its wall time go to one JSON line of --output as soon as it finishes; a run already there (same way, seed
and settings) is skipped, so an interrupted benchmark resumes.

    nice -n 5 python -m scripts.study.gateway_vs_builtin --seeds 0 1 2
    python -m scripts.study.gateway_vs_builtin --table     # the table of the file's runs (docs/howto/gateway.md)
    python -m scripts.study.gateway_vs_builtin --table --with benchmarks/results/gateway_vs_builtin/unknown-host/gateway_vs_builtin_best_commit.jsonl
                                                        # ... beside the program runs after the gateway's tree
                                                        # commits the best candidate (2ebeabb; written with
                                                        # --ways program --output that file)
    python -m scripts.study.gateway_vs_builtin --roles     # each final model re-measured with more episodes
                                                        # (benchmarks/results/gateway_vs_builtin/unknown-host/gateway_vs_builtin_final_models.jsonl)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from statistics import mean, pstdev
from typing import Any

from benchmarks.harness import default_out, provenance

ROOT = Path(__file__).resolve().parents[2]

CONFIGS = {"builtin": ROOT / "src/teamrl/configs/split_calc_team.yaml",
           "program": ROOT / "examples/gateway/split_calc_program.yaml"}


def budget_overrides(args: argparse.Namespace) -> list[str]:
    """The settings both ways share beyond their configs (empty budget flags keep the shipped config's)."""
    out = [f"train.threads={args.threads}", "train.checkpoint_every=0"]
    for key, value in (("train.steps", args.steps), ("train.eval_every", args.eval_every),
                       ("train.eval_instances", args.eval_instances),
                       ("train.midway_eval_instances", args.midway_eval_instances)):
        if value is not None:
            out.append(f"{key}={value}")
    return out


def done(output: Path) -> set[tuple[str, int, str]]:
    """(way, seed, overrides) of the runs already in the results file."""
    if not output.is_file():
        return set()
    rows = [json.loads(line) for line in output.read_text().splitlines() if line.strip()]
    return {(r["way"], r["seed"], " ".join(r["overrides"])) for r in rows}


def warmed_model() -> str:
    """The built-in config's warmed-up tiny default (warmed up now if it is not cached)."""
    from teamrl.config import load_config
    from teamrl.setup.team import resolve_model_path

    return resolve_model_path(load_config(CONFIGS["builtin"]))


def train_once(way: str, seed: int, overrides: list[str], model: str, runs_dir: Path) -> dict[str, Any]:
    """Train one way on one seed; its curve and final numbers."""
    from teamrl.config import load_config
    from teamrl.training.loop import train

    config = load_config(CONFIGS[way], overrides + [f"seed={seed}", f"output_dir={runs_dir / f'{way}-seed{seed}'}"])
    started = time.time()
    run = train(config, model_path=model, progress=False)
    wall = time.time() - started
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    # Held-out evaluations are the rows with eval/instances (step 0, every eval_every, the final one).
    curve = [{"step": r["step"], "success": r["eval/success"], "instances": int(r["eval/instances"])}
             for r in rows if "eval/instances" in r]
    steps = [r for r in rows if "train/samples" in r]
    summary = json.loads((run / "summary.json").read_text())
    return {"way": way, "seed": seed, "config": str(CONFIGS[way].relative_to(ROOT)), "overrides": overrides,
            "model": model, "wall_s": round(wall, 1), "curve": curve, "summary": summary,
            "train_success_mean": mean(r["train/success"] for r in steps),
            "samples_per_step": mean(r["train/samples"] for r in steps),
            "dropped_runs": sum(r.get("gateway/dropped_runs", 0.0) + r.get("gateway/dropped_runs_branches", 0.0)
                                for r in steps),
            "run_dir": str(run)} | provenance()


def table(outputs: list[Path]) -> str:
    """Markdown: held-out success at each evaluation and the mean training success, per way and seed, with each
    way's mean and spread. Given several results files, each row's way is labelled with its file's name."""
    rows = []
    for output in outputs:
        for line in output.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                row["label"] = row["way"] if len(outputs) == 1 else f"{row['way']} ({output.stem})"
                rows.append(row)
    points = sorted({(p["step"], p["instances"]) for r in rows for p in r["curve"]})
    head = "| way | seed | " + " | ".join(f"step {s} ({n})" for s, n in points) + " | train success | wall |"
    lines = [head, "|" + "---|" * (len(points) + 4)]
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = sorted((r for r in rows if r["label"] == label), key=lambda r: r["seed"])
        for r in mine:
            at = {(p["step"], p["instances"]): p["success"] for p in r["curve"]}
            lines.append(f"| {label} | {r['seed']} | " + " | ".join(f"{at[p]:.0%}" if p in at else "" for p in points)
                         + f" | {r['train_success_mean']:.3f} | {r['wall_s'] / 60:.1f} min |")
        if len(mine) > 1:
            cells = []
            for point in points:
                values = [p["success"] for r in mine for p in r["curve"] if (p["step"], p["instances"]) == point]
                cells.append(f"{mean(values):.1%} ± {pstdev(values):.1%}" if values else "")
            train = [r["train_success_mean"] for r in mine]
            lines.append(f"| **{label}** | mean ± sd | " + " | ".join(cells)
                         + f" | {mean(train):.3f} ± {pstdev(train):.3f} | |")
    return "\n".join(lines)


def role_accuracy(run_dir: str, instances: int = 100, samples: int = 8, seed: int = 0, threads: int = 1
                  ) -> dict[str, float]:
    """A run's final model on held-out instances at temperature 1 (the eval's), `samples` times each, by the
    built-in workflow's code whichever way it was trained: the team's success (analyst, then calculator on its
    formula), the analyst's share of right formulas, and the calculator's share of right values when handed
    the right formula (its skill apart from the analyst's); and teamrl's own held-out `evaluate` (one episode per
    instance) with eval seeds 1000..1008 instead of the run's seed, averaged."""
    import torch

    from teamrl.config import load_config
    from teamrl.policies.loading import load_policy
    from teamrl.rollout.agent_params import agent_sampling
    from teamrl.rollout.builtin_engine import SamplingParams
    from teamrl.rollout.engine_routing import sample
    from teamrl.tasks.split_calc import OPERATIONS
    from teamrl.setup.team import build_workflow
    from teamrl.rollout.evaluation import evaluate

    torch.set_num_threads(threads)
    config = load_config(CONFIGS["builtin"])
    workflow = build_workflow(config)
    policy = load_policy("shared", str(Path(run_dir) / "checkpoints" / "final" / "shared"))
    params = SamplingParams(temperature=1.0, max_new_tokens=10)
    generator = torch.Generator().manual_seed(seed)
    states = [workflow.new_state("heldout", i) for i in range(instances) for _ in range(samples)]
    for agent in ("analyst", "calculator"):  # the team, one episode per state
        groups = sample(policy, [policy.encode_prompt(workflow.render(agent, s)) for s in states], 1, params, generator)
        for state, group in zip(states, groups):
            workflow.apply(agent, state, group[0].text)
    out = {"team": mean(workflow.success(s) for s in states)}
    eval_params = agent_sampling(config.rollout, workflow.agents, "eval")
    mapping = {"analyst": "shared", "calculator": "shared"}
    out["evaluate_9_seeds"] = mean(evaluate(workflow, {"shared": policy}, mapping, instances, seed=1000 + s,
                                            sampling=eval_params)[0]["success"] for s in range(9))
    states = states[::samples]
    for agent in ("analyst", "calculator"):
        for state in states:
            state.formula = OPERATIONS[state.item[0]]  # the calculator is handed the right formula
        groups = sample(policy, [policy.encode_prompt(workflow.render(agent, s)) for s in states], samples, params,
                        generator)
        right = [workflow.apply(agent, s, g.text).team for s, group in zip(states, groups) for g in group]
        out[agent] = mean(right)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--ways", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--steps", type=int, help="train.steps (default: the shipped config's)")
    parser.add_argument("--eval-every", type=int, help="train.eval_every")
    parser.add_argument("--eval-instances", type=int, help="train.eval_instances")
    parser.add_argument("--midway-eval-instances", type=int, help="train.midway_eval_instances")
    parser.add_argument("--threads", type=int, default=1, help="train.threads (torch threads per run)")
    parser.add_argument("--out", "--output", dest="output", type=Path,
                        default=default_out("gateway_vs_builtin").with_suffix(".jsonl"))
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs/gateway_vs_builtin")
    parser.add_argument("--table", action="store_true", help="print the table of --output (and --with) and exit")
    parser.add_argument("--with", dest="more", type=Path, nargs="+", default=[],
                        help="with --table: more results files in the table (e.g. the program runs after a fix)")
    parser.add_argument("--roles", action="store_true", help="print each run's `role_accuracy` and exit")
    args = parser.parse_args()
    if args.table:
        print(table([args.output, *args.more]))
        return
    if args.roles:
        target = args.output.with_name(args.output.stem + "_final_models.jsonl")
        with target.open("w") as f:
            for r in (json.loads(line) for line in args.output.read_text().splitlines() if line.strip()):
                row = {"way": r["way"], "seed": r["seed"], "run_commit": r["commit"]}
                row |= role_accuracy(r["run_dir"], threads=args.threads)
                f.write(json.dumps(row | provenance()) + "\n")
                print(json.dumps(row), flush=True)
        return
    overrides = budget_overrides(args)
    model = warmed_model()
    for seed in args.seeds:  # seed-major: an interrupted benchmark has both ways of its first seeds
        for way in args.ways:
            if (way, seed, " ".join(overrides)) in done(args.output):
                print(f"{way} seed {seed}: in {args.output} already, skipped", flush=True)
                continue
            result = train_once(way, seed, overrides, model, args.runs_dir)
            args.output.parent.mkdir(parents=True, exist_ok=True)
            with args.output.open("a") as f:
                f.write(json.dumps(result) + "\n")
            curve = ", ".join(f"{p['step']}: {p['success']:.0%}" for p in result["curve"])
            print(f"{way} seed {seed}: {curve} ({result['wall_s'] / 60:.1f} min)", flush=True)


if __name__ == "__main__":
    main()
