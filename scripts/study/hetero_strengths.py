"""Per-role accuracy of the study's two Split-Calc bases (A: the tiny default, B: the Qwen2 variant).

Run: TEAMRL_CACHE=.cache python -m scripts.study.hetero_strengths [--warmup-seed 100] [--b-steps 800] [--instances 100]
Warms up (or reads from the cache) base A as the study's seed does and base B with `--b-steps`
supervised steps (default: the study's, 1.6 x policy.warmup_sft_steps), then prints each base's
accuracy per role on the validation split (`teamrl.study.hetero_rows.role_accuracy`: the other role
played by a correct scripted agent, 4 samples per instance at the evaluation temperature), B's
warm-up time, and the `hetero` row's assignment.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from teamrl.study.hetero_rows import B_STEPS_PER_A_STEP, base_strengths, hetero_assignment
from teamrl.study.protocol import Protocol
from teamrl.study.rows import study
from teamrl.study.seed_run import row_config, seed_base
from teamrl.setup.variant_warmup import VariantRecipe, warm_up_variant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warmup-seed", type=int, default=100)
    parser.add_argument("--b-steps", type=int, default=0, help="base B's warm-up steps (0: the study's)")
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. policy.warmup_sft_steps=200")
    args = parser.parse_args()
    config = row_config(study("split_calc"), Protocol(seeds=(0,)), (), 0, Path("runs/hetero-strengths"), "base",
                        args.overrides)
    steps = args.b_steps or round(B_STEPS_PER_A_STEP * config.policy.warmup_sft_steps)
    a_path = seed_base(config, args.warmup_seed, verbose=True)
    b_path = warm_up_variant(VariantRecipe.for_task(config.task, config.workflow.max_turns, steps=steps,
                                                    seed=args.warmup_seed))
    warmup = json.loads((b_path / "warmup.json").read_text())
    strengths = base_strengths(config, {"A": a_path, "B": str(b_path)}, args.instances, 0)
    print(json.dumps({"b_steps": steps, "b_warmup_seconds": warmup["seconds"],
                      "instances": args.instances,
                      "strengths": strengths, "assignment": hetero_assignment(strengths)}, indent=2))


if __name__ == "__main__":
    main()
