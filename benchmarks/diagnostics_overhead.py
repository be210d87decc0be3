"""Per-step cost of the role-aware diagnostics: none vs cheap vs full, measured side by side.

Run: python -m benchmarks run diagnostics_overhead [--steps 12] [--model PATH] [--set key=value ...]
     (OMP_NUM_THREADS=1 gives steadier timings on a shared machine)

Four copies of one policy: diagnostics none / cheap / full, and `split` (none, but the update
backpropagated role by role as the diagnostics do). Every step one rollout batch is sampled
(from the `none` copy's policy) and each copy then runs the loop's own post-rollout work on those
same samples: advantages -> update (with its level's per-role tracker) -> per-step diagnostics
metrics and alerts. Sharing the samples removes the biggest source of noise (different response
lengths); the order of the four updates rotates every step, so drifting machine load hits each
alike. A level's step time is the shared rollout time plus its own post-rollout time; overhead is
the median over steps of (its step time / the `none` step time - 1).
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import time
from pathlib import Path

import torch

from teamrl.config import load_config
from teamrl.diagnostics.session import RunDiagnostics
from teamrl.setup.team import build_policies, build_workflow
from teamrl.training.credit import assign_advantages, trainable
from teamrl.training.loop import rollout_metrics
from teamrl.training.schedule import rollout_step
from teamrl.training.update import make_optimizer, update_policy
from benchmarks.harness import add_out_argument, write_result

CONFIG = Path(__file__).resolve().parents[1] / "src" / "teamrl" / "configs" / "plan_path_team.yaml"
# Each variant's config overrides. `split` keeps diagnostics off but backpropagates role by role
# (a zero per-role KL coefficient forces the split without changing the loss), to tell the cost
# of the diagnostics themselves from the effect of the split (smaller padded batches per role).
LEVELS = {"none": ["diagnostics.level=none"],
          "split": ["diagnostics.level=none", "algorithm.kl_coef_by_role={tool: 0.0}"],
          "cheap": ["diagnostics.level=cheap"], "full": ["diagnostics.level=full"]}


class Copy:
    """One diagnostics level: its own policies, optimizers, trackers and diagnostics state."""

    def __init__(self, level: str, overrides: list[str], model: str | None) -> None:
        self.config = load_config(CONFIG, overrides + LEVELS[level])
        self.workflow = build_workflow(self.config)
        self.policies, self.mapping = build_policies(self.config, self.workflow, model)
        self.diagnostics = RunDiagnostics(self.config, self.workflow.agents, self.mapping)
        self.optimizers = {n: make_optimizer(p, self.config.policy_config(n), self.config.train,
                                             self.diagnostics.needs_reference) for n, p in self.policies.items()}
        factory = self.diagnostics.tracker_factory()
        self.trackers = {n: factory(n, opt) if factory else None for n, opt in self.optimizers.items()}
        self.seconds: list[float] = []  # post-rollout seconds per step

    def rollout(self, step: int) -> tuple[list, list, float]:
        started = time.perf_counter()
        samples, episodes = rollout_step(self.config, self.workflow, self.policies, self.mapping, step,
                                         torch.Generator().manual_seed(1000 + step), random.Random(1000 + step))
        return samples, episodes, time.perf_counter() - started

    def learn(self, step: int, samples: list, episodes: list) -> None:
        """Everything the loop does after the rollout, on a private copy of the samples."""
        samples, episodes = copy.deepcopy(samples), copy.deepcopy(episodes)
        started = time.perf_counter()
        algo, rng = self.config.algorithm, random.Random(step)
        metrics = rollout_metrics(samples, episodes)
        assign_advantages(samples, episodes, algo)
        per_role = []
        for name, opt in self.optimizers.items():
            mine = trainable([s for s in samples if s.policy == name], algo.drop_zero_signal)
            tracker = self.trackers[name]
            if mine:
                update_policy(opt, mine, algo, self.config.rollout.temperature, self.config.train.grad_clip,
                              rng, tracker)
                per_role.append(tracker.end_step() if tracker is not None else {})
        metrics.update(self.diagnostics.step_metrics(samples, per_role))
        self.diagnostics.alerts(step, metrics)
        self.seconds.append(time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--model", default=None, help="policy folder (default: the config's, warmed up)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    add_out_argument(parser, "diagnostics_overhead")
    args = parser.parse_args()
    overrides = ["train.batch_size=4", "train.steps=100", *args.set]
    torch.manual_seed(0)
    copies = {level: Copy(level, overrides, args.model) for level in LEVELS}
    order, rollouts = list(LEVELS), []
    for step in range(args.steps):
        samples, episodes, seconds = copies["none"].rollout(step)
        rollouts.append(seconds)
        for level in order:
            copies[level].learn(step, samples, episodes)
        order = order[1:] + order[:1]
    base = [r + s for r, s in zip(rollouts, copies["none"].seconds)]
    lines = [f"diagnostics overhead: {args.steps} steps, every variant on the same samples, interleaved; "
             f"overrides {' '.join(overrides)}",
             f"median rollout {statistics.median(rollouts):.3f} s per step (shared by every variant)",
             f"{'level':<7}{'median update+diag s':>22}{'median step s':>15}{'median overhead':>17}"]
    for level, c in copies.items():
        steps = [r + s for r, s in zip(rollouts, c.seconds)]
        overhead = statistics.median(mine / ref - 1 for mine, ref in zip(steps, base))
        lines.append(f"{level:<7}{statistics.median(c.seconds):>22.3f}{statistics.median(steps):>15.3f}"
                     f"{overhead:>17.1%}")
    text = "\n".join(lines)
    print(text)
    write_result(args.out, text.splitlines())


if __name__ == "__main__":
    main()
