"""The study tasks' priors: the scripted demos' composition and the warmed-up base's pass@1 / pass@K / greedy.

Run: TEAMRL_CACHE=.cache python -m scripts.study.study_base_rates [--warmup-seed 100] [--instances 100] split_calc
     [config overrides, e.g. policy.warmup_sft_steps=200]
Prints (and with --out writes as JSON) what the warm-up imitates (each scripted behaviour's share,
counted from the scripts) and how the warmed-up base does on the validation split: pass@1 and
pass@K (K = algorithm.k episodes per instance at temperature 1) and greedy, team and single agent.
For split_nav it also probes the team role by role on sampled episodes: how often the spotter's
report is right, and how often the walker then reaches the goal (where a redesign has to act).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from teamrl.config import RunConfig, load_config
from teamrl.demos import split_calc as calc_demos, split_nav as nav_demos
from teamrl.rollout.agent_params import agent_sampling
from teamrl.study.protocol import Protocol
from teamrl.study.rows import Row, study
from teamrl.study.seed_run import base_rates, row_config, seed_base
from teamrl.tasks.split_nav import offset_of
from teamrl.setup.team import build_policies, build_workflow
from teamrl.rollout.evaluation import evaluate

COMPOSITION = {"split_calc": calc_demos.composition, "split_nav": nav_demos.composition}


def nav_roles(config: RunConfig, model_path: str, instances: int) -> dict[str, float]:
    """Split-Nav's team, sampled once per instance: the spotter's share of right reports and the walker's
    success on the episodes whose report was right."""
    workflow = build_workflow(config)
    policies, mapping = build_policies(config, workflow, model_path)
    sampling = agent_sampling(config.rollout, workflow.agents, "eval")
    _, episodes = evaluate(workflow, policies, mapping, instances, seed=7, sampling=sampling)
    right = [e for e in episodes
             if workflow.reported_offset(e.state) == offset_of(e.state.layout[1], e.state.layout[2])]
    return {"spotter/right": len(right) / len(episodes),
            "walker/success_given_right_report": sum(e.success for e in right) / max(len(right), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", choices=sorted(COMPOSITION))
    parser.add_argument("--warmup-seed", type=int, default=100)
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--out", default="")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. policy.warmup_sft_steps=800")
    args = parser.parse_args()
    chosen = study(args.study)
    protocol = Protocol(seeds=(0,), validation_instances=args.instances)
    report: dict[str, object] = {"study": args.study, "overrides": args.overrides, "warmup_seed": args.warmup_seed}
    for kind in ("team", "single"):
        extra = ("workflow.name=single",) if kind == "single" else ()
        config = row_config(chosen, protocol, extra, 0, Path("runs/base-rates"), "base", args.overrides)
        report[f"composition/{kind}"] = COMPOSITION[args.study](build_workflow(config), episodes=2000)
        model = seed_base(config, args.warmup_seed, verbose=True)
        greedy = load_config(chosen.config, [*args.overrides, *extra, "rollout.eval_temperature=0.0",
                                             f"train.eval_instances={args.instances}"])
        report[f"base/{kind}"] = base_rates(config, greedy, model, args.instances, config.algorithm.k, 0)
        if args.study == "split_nav" and kind == "team":
            report["roles/team"] = nav_roles(config, model, args.instances)
        print(json.dumps({k: v for k, v in report.items() if k.endswith(kind)}, indent=1), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
