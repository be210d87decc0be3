"""Time per training step vs instances per step, K and model size, with the phase that dominates.

    python -m benchmarks run scaling --quick          # a small grid: ~3 min of CPU, 8-10 min wall at load 10
    python -m benchmarks run scaling --models tiny    # the full grid, a model at a time (not timed yet;
    python -m benchmarks run scaling --models 27M     # the 104M rows are the longest: well over half an
    python -m benchmarks run scaling --models 104M    # hour on a loaded 2-core machine is to be expected)

The job is the default two-agent Plan-Path team (src/teamrl/configs/plan_path_team.yaml: 6x6 grids,
tool + plan, up to 3 turns, 40 new tokens), trained by `teamrl.training.loop.train` with one torch
thread, every row in this process one after another. Models: random Llamas over teamrl's character
vocabulary (the tiny default's shape, ~27M and ~104M parameters), or --tiny-model for a warmed-up
tiny default (a random model writes no runnable program, so only a warmed-up one shows the
sandbox's share). Every sample is trained (algorithm.drop_zero_signal=false) so that the update's
work does not depend on how many groups a random model happens to give a reward spread.

Phases per step, wall seconds (medians over the timed steps, from `metrics.jsonl` and the probes
of benchmarks/teamrl_steps.py): generate = rollout - score; score = verifiers (score - sandbox);
sandbox = the tool's sandboxed programs; update = update and diagnostics; eval = the run's final
held-out evaluation of `--eval-instances` (the default config's 200 unless told otherwise), charged
per step at the default config's schedule (its train.eval_every); other = the rest of the step
(advantages, metrics, logging). The step's CPU seconds (process tree) are reported beside its wall
seconds: on a machine shared with other jobs the CPU seconds are the figure that load moves least.

Work of a step = sampled response tokens x model parameters (what decode and update FLOPs grow
with, attention and prompts aside); `cost` is CPU seconds per step (eval share included) / work,
relative to the first row: 1.0 on every row means time grows linearly in work.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import add_out_argument, provenance, write_result
from benchmarks.teamrl_steps import measured, parameter_count, save_random_llama, timed_train

MODELS = {  # name -> (hidden, layers, heads, intermediate)
    "tiny": (128, 4, 4, 384),
    "27M": (512, 8, 8, 1536),
    "104M": (768, 11, 12, 3072),
}


def default_eval_every() -> int:
    """The default config's evaluation period (plan_path_team.yaml's train.eval_every)."""
    from teamrl.cli import DEFAULT_CONFIG
    from teamrl.config import load_config

    return load_config(DEFAULT_CONFIG, []).train.eval_every


EVAL_EVERY = default_eval_every()
PHASES = ("generate", "score", "sandbox", "update", "eval", "other")
FULL_GRID = [("tiny", 4, 8), ("tiny", 8, 8), ("tiny", 16, 8), ("tiny", 8, 4), ("tiny", 8, 16),
             ("27M", 4, 8), ("27M", 8, 8), ("104M", 2, 8), ("104M", 4, 8)]
QUICK_GRID = [("tiny", 2, 4), ("tiny", 4, 4), ("tiny", 2, 8), ("27M", 1, 4), ("104M", 1, 2)]


@dataclass
class Row:
    """One (model, instances, K) setting: medians over its timed steps."""

    model: str
    params: int
    instances: int
    k: int
    step_s: float  # wall seconds per step, eval share included
    cpu_s: float  # CPU seconds per step (process tree), eval share included
    tokens: float  # sampled response tokens per step
    samples: float  # trained samples per step
    phases: dict[str, float]  # phase -> seconds per step


def phase_seconds(rollout_s: float, update_s: float, score_s: float, sandbox_s: float, wall_s: float,
                  eval_per_step_s: float) -> dict[str, float]:
    """A step's seconds by phase (see the module docstring); the phases sum to wall_s + eval_per_step_s
    (`other` is clamped at 0)."""
    if not 0 <= sandbox_s <= score_s + 1e-9 or score_s > rollout_s + 1e-9:
        raise ValueError(f"need 0 <= sandbox_s <= score_s <= rollout_s, got sandbox {sandbox_s}, score {score_s}, "
                         f"rollout {rollout_s}")
    return {"generate": rollout_s - score_s, "score": score_s - sandbox_s, "sandbox": sandbox_s,
            "update": update_s, "eval": eval_per_step_s, "other": max(wall_s - rollout_s - update_s, 0.0)}


def dominant_phase(phases: dict[str, float]) -> tuple[str, float]:
    """The phase with the most seconds and its share of the step (ties: the first in PHASES order)."""
    total = sum(phases.values())
    if total <= 0:
        raise ValueError(f"no time in any phase: {phases}")
    name = max(PHASES, key=lambda p: (phases.get(p, 0.0), -PHASES.index(p)))
    return name, phases[name] / total


def relative_cost(rows: list[Row]) -> list[float]:
    """CPU seconds per unit of work (tokens x parameters) of each row, relative to the first row's."""
    costs = [r.cpu_s / (r.tokens * r.params) for r in rows]
    return [c / costs[0] for c in costs]


def measure_row(model: str, folder: Path, instances: int, k: int, args: argparse.Namespace, runs: Path) -> Row:
    """Train the team on `folder` with (instances, K) and reduce its timed steps to a Row."""
    overrides = ["task.name=plan_path", "task.size=6", "task.min_distance=3", "workflow.name=team",
                 "workflow.max_turns=3", f"policy.model={folder}", "policy.lr=1e-4", "rollout.max_new_tokens=40",
                 f"algorithm.k={k}", "algorithm.drop_zero_signal=false", f"train.batch_size={instances}",
                 f"train.steps={args.warmup_steps + args.steps}", "train.eval_every=0",
                 f"train.eval_instances={args.eval_instances}", "report_to=none"]
    records = timed_train(overrides, runs / f"{model}-{instances}-{k}")
    steps = measured(records, args.warmup_steps)
    final = records[-1]  # the final evaluation: its row follows the last step's, nothing else between
    if final.is_training_step or "time/eval_s" not in final.metrics:
        raise RuntimeError("the run's last logged row is not its final evaluation; has train() changed?")
    eval_wall, eval_cpu = final.wall_s / EVAL_EVERY, final.cpu_s / EVAL_EVERY
    med = statistics.median
    phases = {name: med([phase_seconds(r.metrics["time/rollout_s"], r.metrics["time/update_s"], r.score_s,
                                       r.sandbox_s, r.wall_s, eval_wall)[name] for r in steps]) for name in PHASES}
    return Row(model, parameter_count(folder), instances, k, med([r.wall_s for r in steps]) + eval_wall,
               med([r.cpu_s for r in steps]) + eval_cpu, med([r.tokens for r in steps]),
               med([r.trained for r in steps]), phases)


def format_table(rows: list[Row]) -> str:
    """The Markdown table of the README."""
    lines = ["| model | params | instances | K | s/step | CPU s/step | tokens/step | samples/step | "
             "generate | score | sandbox | update | eval | dominant | cost (time/work, vs row 1) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row, cost in zip(rows, relative_cost(rows)):
        name, share = dominant_phase(row.phases)
        parts = " | ".join(f"{row.phases[p]:.2f}" for p in PHASES[:-1])
        lines.append(f"| {row.model} | {row.params / 1e6:.1f}M | {row.instances} | {row.k} | {row.step_s:.2f} | "
                     f"{row.cpu_s:.2f} | {row.tokens:.0f} | {row.samples:.0f} | {parts} | {name} ({share:.0%}) | "
                     f"{cost:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small grid, 1 warm-up + 1 timed step (~3 min)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per row")
    parser.add_argument("--warmup-steps", type=int, default=1, help="untimed steps first")
    parser.add_argument("--eval-instances", type=int, default=200,
                        help="held-out instances of the timed evaluation (the default config's 200)")
    parser.add_argument("--models", default="", help="only these models of the grid, e.g. tiny,27M")
    parser.add_argument("--tiny-model", default="", help="model folder for the tiny rows (e.g. a warmed-up tiny default)")
    add_out_argument(parser, "scaling")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    # train.threads: auto (the default) re-decides the count every step and takes OMP_NUM_THREADS when it
    # is set: without this an idle machine's rows would run on 2 threads, not the 1 the table states.
    os.environ["OMP_NUM_THREADS"] = "1"
    grid = QUICK_GRID if args.quick else FULL_GRID
    if args.models:
        unknown = set(args.models.split(",")) - set(MODELS)
        if unknown:
            sys.exit(f"--models: unknown {', '.join(sorted(unknown))}; choose from {', '.join(MODELS)}")
        grid = [g for g in grid if g[0] in args.models.split(",")]
    if args.quick:
        args.steps, args.eval_instances = 1, min(args.eval_instances, 8)
    started, load, run = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg(), provenance()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: Path(args.tiny_model) if name == "tiny" and args.tiny_model else
                   save_random_llama(Path(tmp) / name, *shape) for name, shape in MODELS.items()
                   if any(g[0] == name for g in grid)}
        for model, instances, k in grid:
            rows.append(measure_row(model, folders[model], instances, k, args, Path(tmp) / "runs"))
            print(f"{model} instances={instances} K={k}: {rows[-1].step_s:.2f} s/step", flush=True)
    after = os.getloadavg()
    import transformers

    header = [f"Scaling of a teamrl training step ({started}), the default Plan-Path team, 1 torch thread",
              f"cores: {os.cpu_count()}, load average (1/5/15 min) before: {', '.join(f'{x:.2f}' for x in load)}, "
              f"after: {', '.join(f'{x:.2f}' for x in after)}; torch {torch.__version__}, "
              f"transformers {transformers.__version__}",
              f"commit {run['commit']}, command: {run['command']}",
              f"settings: {json.dumps({'steps': args.steps, 'warmup_steps': args.warmup_steps, 'eval_instances': args.eval_instances, 'tiny_model': args.tiny_model or 'random'})}",
              f"phases in wall seconds per step (medians); eval = one held-out evaluation of {args.eval_instances} "
              f"instances every {EVAL_EVERY} steps, charged per step (also in s/step and CPU s/step); cost = "
              "(CPU s/step) / (tokens x params), relative to the first row (1.0 = linear in work)", ""]
    report = "\n".join(header) + format_table(rows) + "\n"
    write_result(args.out, report.splitlines(), meta=run)
    print(report)


if __name__ == "__main__":
    main()
