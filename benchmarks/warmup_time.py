"""The tiny default's warm-up: the first recipe vs the current default, side by side in one run.

Run: OMP_NUM_THREADS=1 python -m benchmarks run warmup_time [--configs plan_path_team math_team]
         [--seeds 0] [--instances 200] [--quick] [--scale 1.0] [--set KEY=VALUE ...] [--out benchmarks/results/warmup_time/unknown-host/warmup_time.txt]
     (--quick: timings and held-out demo losses only, no evaluation of the untrained team;
      --scale 0.1: both recipes for a tenth of their steps, for the time ratio on a busy machine;
      --skip-first: only the second recipe, for a candidate's quality without the time ratio)

For each config (a shipped `src/teamrl/configs/*.yaml` using the tiny default) and warm-up seed,
both recipes are warmed up from scratch in a throwaway cache, one after the other, and timed in
wall and CPU seconds of this process (CPU seconds are steadier on a shared machine). Each
checkpoint is then scored by the held-out demo loss (the same demos for both recipes) and by the
held-out success of the *untrained* team and of the single agent (greedy, the config's eval
settings): the quality the warm-up hands to training.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from teamrl.config import load_config
from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer
from teamrl.rollout.agent_params import agent_sampling
from teamrl.setup.team import build_policies, build_workflow
from teamrl.rollout.evaluation import evaluate
from teamrl.setup.sft import heldout_loss
from teamrl.setup.tiny_default import WarmupRecipe, heldout_demos, warm_up
from benchmarks.harness import add_out_argument, write_result

CONFIGS = Path(__file__).resolve().parents[1] / "src" / "teamrl" / "configs"
FIRST_RECIPE = dict(steps=500, batch_size=64, lr=2e-3, warmup_steps=20, pack_tokens=0, bf16=False,
                    eval_every=0, patience=0)
"""The warm-up as first shipped (~4.5-5.5 min on an idle machine for Plan-Path)."""


def parse_sets(pairs: list[str]) -> dict[str, object]:
    """`key=value` recipe overrides (values typed like the recipe's defaults)."""
    defaults = {f.name: f.default for f in dataclasses.fields(WarmupRecipe)}
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in defaults or key in ("task", "workflow", "max_turns", "seed"):
            raise SystemExit(f"--set {pair!r}: expected KEY=VALUE with KEY one of "
                             f"{', '.join(k for k in defaults if k not in ('task', 'workflow', 'max_turns', 'seed'))}")
        kind = type(defaults[key])
        out[key] = value.lower() in ("1", "true", "yes") if kind is bool else kind(float(value) if kind is int else value)
    return out


def recipes(config_name: str, seed: int, scale: float = 1.0, candidate: dict[str, object] | None = None
            ) -> dict[str, WarmupRecipe]:
    """The first and the current default recipe for a config, as its `policy` section would build them.

    A config's own `warmup_sft_steps` applies to the current recipe (the first recipe used 500 steps).
    candidate: recipe fields that replace the current default's (to try a recipe before making it the default).
    scale: both recipes' steps times this (a reduced run: the time ratio holds, the quality does not).
    """
    config = load_config(CONFIGS / f"{config_name}.yaml", [])
    kind = "team" if config.workflow.name == "single" else config.workflow.name
    current = WarmupRecipe.for_task(config.task, config.workflow.max_turns, kind,
                                    steps=config.policy.warmup_sft_steps, seed=seed)
    current = dataclasses.replace(current, **(candidate or {}))
    first = dataclasses.replace(current, **FIRST_RECIPE)
    pair = {"first": first, "candidate" if candidate else "current": current}
    return {label: dataclasses.replace(r, steps=max(1, round(r.steps * scale))) for label, r in pair.items()}


def untrained_success(config_name: str, model_dir: Path, instances: int) -> dict[str, float]:
    """Held-out success of the untrained team and single agent on `model_dir` (the config's eval settings)."""
    out = {}
    for label, overrides in (("team", []), ("single", ["workflow.name=single"])):
        config = load_config(CONFIGS / f"{config_name}.yaml", [f"policy.model={model_dir}", *overrides])
        workflow = build_workflow(config)
        policies, mapping = build_policies(config, workflow)
        sampling = agent_sampling(config.rollout, workflow.agents, "eval")
        metrics, _ = evaluate(workflow, policies, mapping, instances, seed=config.seed, sampling=sampling)
        out[label] = metrics["success"]
    return out


def demo_loss_of(model_dir: Path, recipe: WarmupRecipe) -> float:
    """Held-out demo loss of a saved checkpoint on the recipe's held-out demos."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    policy = Policy("bench", model, build_char_tokenizer(), use_chat_template=False)
    return heldout_loss(policy, heldout_demos(recipe))


def measure(recipe: WarmupRecipe, cache: Path) -> tuple[Path, dict[str, float]]:
    """Warm up `recipe` from scratch in `cache`; its folder, wall and CPU seconds, steps taken."""
    os.environ["TEAMRL_CACHE"] = str(cache)
    wall, cpu = time.perf_counter(), time.process_time()
    folder = warm_up(recipe, force=True, verbose=False)
    row = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    row["steps"] = json.loads((folder / "warmup.json").read_text())["steps_done"]
    return folder, row


def describe(recipe: WarmupRecipe) -> str:
    return (f"{recipe.steps} steps x {recipe.batch_size} demos, lr {recipe.lr:g}, warm-up {recipe.warmup_steps}, "
            f"{'packed ' + str(recipe.pack_tokens) + '-token rows' if recipe.pack_tokens else 'padded rows'}"
            f"{', bf16' if recipe.bf16 else ''}{f', early stop {recipe.patience}x{recipe.eval_every}' if recipe.patience else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["plan_path_team", "math_team"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--instances", type=int, default=200, help="held-out episodes per evaluation")
    parser.add_argument("--quick", action="store_true", help="skip the untrained team's evaluations")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="run both recipes for this share of their steps (a reduced run: time ratios only)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="a candidate recipe instead of the current default (e.g. steps=120 lr=4e-3 pack_tokens=256)")
    parser.add_argument("--skip-first", action="store_true",
                        help="warm up only the second recipe (a candidate's quality, no side-by-side time ratio)")
    add_out_argument(parser, "warmup_time")
    args = parser.parse_args()
    candidate = parse_sets(args.set)
    lines = [f"# benchmarks/warmup_time.py {' '.join(os.sys.argv[1:])}",
             f"# torch {torch.__version__}, {torch.get_num_threads()} thread(s), {platform.processor() or platform.machine()}, "
             f"load average {os.getloadavg()[0]:.2f} at start"]
    header = f"{'config':15s} {'seed':>4s} {'recipe':8s} {'steps':>5s} {'wall_s':>7s} {'cpu_s':>7s} {'demo_loss':>9s}"
    header += "" if args.quick else f" {'team':>6s} {'single':>6s}"
    printed = False
    with tempfile.TemporaryDirectory(prefix="warmup-bench-") as scratch:
        for name in args.configs:
            for seed in args.seeds:
                pair = recipes(name, seed, args.scale, candidate)
                if not printed:
                    lines += [f"# first:   {describe(pair['first'])}", f"# {list(pair)[1]}: {describe(list(pair.values())[1])}", header]
                    print("\n".join(lines), flush=True)
                    printed = True
                rows = {}
                for label, recipe in pair.items():  # one after the other: the same load for both
                    if args.skip_first and label == "first":
                        continue
                    folder, row = measure(recipe, Path(scratch) / f"{name}-{seed}-{label}")
                    row["demo_loss"] = demo_loss_of(folder, pair["first"])  # the same demos for both
                    if not args.quick:
                        row.update(untrained_success(name, folder, args.instances))
                    rows[label] = row
                    text = (f"{name:15s} {seed:4d} {label:8s} {row['steps']:5d} {row['wall_s']:7.1f} "
                            f"{row['cpu_s']:7.1f} {row['demo_loss']:9.4f}")
                    if not args.quick:
                        text += f" {row['team']:6.1%} {row['single']:6.1%}"
                    lines.append(text)
                    print(text, flush=True)
                if args.skip_first:
                    continue
                new, old = list(rows.values())[1], rows["first"]
                ratio = (f"{name:15s} {seed:4d} {list(rows)[1]}/first: wall {new['wall_s'] / old['wall_s']:.2f}x, "
                         f"cpu {new['cpu_s'] / old['cpu_s']:.2f}x")
                lines.append(ratio)
                print(ratio, flush=True)
    write_result(args.out, lines)


if __name__ == "__main__":
    main()
