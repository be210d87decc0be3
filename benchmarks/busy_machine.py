"""A default training step with 1 thread, 2 threads and train.threads=auto, with and without a competing process.

Run: python -m benchmarks run busy_machine [--rounds 1] [--model PATH] [--set key=value ...]
     [--out benchmarks/results/busy_machine/unknown-host/busy_machine.txt]

One step is what the loop does each step on the default quickstart config (Plan-Path team, tiny
default, 16 instances x K = 8, 3 turns, 40 new tokens): rollout, advantages, update. Every
measured step starts from the same weights, optimizer state and sampling seed, so the settings
differ only in their threads. Two blocks, side by side in one run: the machine as it is, then with
one extra process burning a core; within a block the three settings take turns (the order rotates
each round). `auto` is the loop's own ThreadGovernor, re-decided before each of its steps from the
load average and the other processes' CPU use (/proc/stat). Wall seconds and this process's CPU seconds per step are printed, with the load.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from teamrl.config import load_config
from teamrl.setup.team import build_policies, build_workflow
from teamrl.training.credit import assign_advantages, trainable
from teamrl.training.schedule import rollout_step
from teamrl.setup.threads import ThreadGovernor, usable_cores
from teamrl.training.update import make_optimizer, update_policy
from benchmarks.harness import add_out_argument, write_result

CONFIG = Path(__file__).resolve().parents[1] / "src" / "teamrl" / "configs" / "plan_path_team.yaml"
SETTINGS = (1, 2, "auto")


class Step:
    """The default config's policies and optimizers, reset to the same state before every measured step."""

    def __init__(self, overrides: list[str], model: str | None) -> None:
        self.config = load_config(CONFIG, overrides)
        self.workflow = build_workflow(self.config)
        self.policies, self.mapping = build_policies(self.config, self.workflow, model)
        self.optimizers = {n: make_optimizer(p, self.config.policy_config(n), self.config.train, False)
                           for n, p in self.policies.items()}
        self.start = {n: copy.deepcopy((o.policy.network.state_dict(), o.optimizer.state_dict(),
                                        o.scheduler.state_dict())) for n, o in self.optimizers.items()}

    def run(self) -> tuple[float, float]:
        """(wall seconds, CPU seconds of this process) of one step from the saved state."""
        for name, (weights, optimizer, scheduler) in self.start.items():
            self.optimizers[name].policy.network.load_state_dict(weights)
            self.optimizers[name].optimizer.load_state_dict(optimizer)
            self.optimizers[name].scheduler.load_state_dict(scheduler)
        wall, cpu = time.perf_counter(), time.process_time()
        samples, episodes = rollout_step(self.config, self.workflow, self.policies, self.mapping, 0,
                                         torch.Generator().manual_seed(1), random.Random(1))
        algo = self.config.algorithm
        assign_advantages(samples, episodes, algo)
        for name, opt in self.optimizers.items():
            mine = trainable([s for s in samples if s.policy == name], algo.drop_zero_signal)
            if mine:
                update_policy(opt, mine, algo, self.config.rollout.temperature, self.config.train.grad_clip,
                              random.Random(0), None)
        return time.perf_counter() - wall, time.process_time() - cpu


def burner() -> subprocess.Popen:
    """A process that keeps one core busy until killed."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def measure(step: Step, rounds: int, governor: ThreadGovernor) -> dict[str, list[tuple[float, float, int]]]:
    """setting -> [(wall s, CPU s, threads used)] over `rounds` rounds in rotating order."""
    results: dict[str, list[tuple[float, float, int]]] = {str(s): [] for s in SETTINGS}
    order = list(SETTINGS)
    for _ in range(rounds):
        for setting in order:
            count = governor.apply() if setting == "auto" else setting
            torch.set_num_threads(count)
            wall, cpu = step.run()
            results[str(setting)].append((wall, cpu, count))
            print(f"  threads={setting} ({count} used): {wall:.1f} s wall, {cpu:.1f} s CPU, load {_load()}", flush=True)
        order = order[1:] + order[:1]
    return results


def table(blocks: dict[str, tuple[dict[str, list[tuple[float, float, int]]], str]]) -> list[str]:
    """One row per (block, setting): median wall and CPU seconds, the threads used, the ratio to 1 thread."""
    lines = [f"{'machine':<22}{'threads':<9}{'used':>6}{'wall s':>9}{'cpu s':>8}{'vs 1 thread':>13}  load"]
    for block, (results, load) in blocks.items():
        one = statistics.median(w for w, _, _ in results["1"])
        for setting, rows in results.items():
            wall = statistics.median(w for w, _, _ in rows)
            used = "/".join(str(c) for c in dict.fromkeys(c for _, _, c in rows))
            lines.append(f"{block:<22}{setting:<9}{used:>6}{wall:>9.1f}{statistics.median(c for _, c, _ in rows):>8.1f}"
                         f"{wall / one:>12.2f}x  {load}")
    return lines


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="steps per setting and block")
    parser.add_argument("--model", default=None, help="policy folder (default: the config's tiny default, warmed up)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    add_out_argument(parser, "busy_machine")
    args = parser.parse_args(argv)
    os.environ.pop("OMP_NUM_THREADS", None)  # `auto` would take it as given instead of reading the load
    torch.set_num_threads(1)  # building (a first warm-up included) must not crawl either
    step = Step(args.set, args.model)
    step.run()  # untimed: first-call allocations and caches
    governor = ThreadGovernor("auto")
    blocks = {}
    before = _load()
    blocks["as it is"] = (measure(step, args.rounds, governor), f"{before} -> {_load()}")
    extra = burner()
    try:
        before = _load()
        blocks["+1 core-burning proc"] = (measure(step, args.rounds, governor), f"{before} -> {_load()}")
    finally:
        extra.kill()
        extra.wait()
    cfg = step.config
    header = [f"busy machine: one default training step ({cfg.train.batch_size} instances x K = {cfg.algorithm.k}, "
              f"{cfg.workflow.max_turns} turns, {cfg.rollout.max_new_tokens} new tokens; overrides: "
              f"{' '.join(args.set) or 'none'}), median of {args.rounds} per row; {usable_cores()} usable cores; "
              "load = 1-minute load average before -> after the block"]
    text = "\n".join(header + table(blocks))
    print(text)
    write_result(args.out, text.splitlines())
    return text


if __name__ == "__main__":
    main()
