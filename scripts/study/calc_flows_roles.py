"""Per-role accuracy of a calc_flows run: the untrained base vs the run's best checkpoint, sampled.

Run: python -m scripts.study.calc_flows_roles RUN_DIR [--instances 100] [--samples 2]
RUN_DIR is a `teamrl train` run of src/teamrl/configs/calc_flows.yaml. Both the warmed-up base (the
run's own warm-up, from the cache) and checkpoints/best are scored on the held-out split of the run's
config (validation) at the evaluation temperature, `--samples` episodes per instance; printed: team
success and each role's accuracy (`teamrl.study.flow_rows.role_accuracy`) as JSON lines.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import mean

from teamrl.config import load_config
from teamrl.rollout.agent_params import agent_sampling
from teamrl.study.flow_rows import role_accuracy
from teamrl.setup.team import build_policies, build_workflow, policies_from_checkpoint
from teamrl.rollout.evaluation import evaluate


def score(run_dir: Path, checkpoint: str | None, instances: int, samples: int) -> dict[str, object]:
    """Team success and per-role accuracy of the base (checkpoint None) or a checkpoint of the run."""
    config = load_config(run_dir / "config.yaml")
    workflow = build_workflow(config)
    policies, mapping = (build_policies(config, workflow) if checkpoint is None
                         else policies_from_checkpoint(config, workflow, run_dir / "checkpoints" / checkpoint))
    sampling = agent_sampling(config.rollout, workflow.agents, "eval")
    episodes = []
    for sample in range(samples):
        episodes += evaluate(workflow, policies, mapping, instances, seed=7_000 + sample, sampling=sampling)[1]
    return {"weights": checkpoint or "untrained", "workflow": config.workflow.name, "regime": config.regime,
            "success": mean(float(e.success) for e in episodes), "episodes": len(episodes),
            "roles": role_accuracy(workflow, episodes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--samples", type=int, default=2)
    args = parser.parse_args()
    if not (args.run_dir / "config.yaml").is_file():
        raise SystemExit(f"{args.run_dir} is not a run folder (no config.yaml): give a `teamrl train` run")
    for checkpoint in (None, "best"):
        print(json.dumps(score(args.run_dir, checkpoint, args.instances, args.samples)), flush=True)


if __name__ == "__main__":
    main()
