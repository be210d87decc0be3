"""What the gateway costs: the same planner + solver team played through the gateway and in-process.

    nice python -m benchmarks run gateway_throughput --rounds 5 --out benchmarks/results/gateway_throughput/unknown-host/gateway_throughput.txt
    py-spy record -f raw -o /tmp/gateway.txt -- python -m benchmarks run gateway_throughput --gateway-only 5

What is compared (rollouts only, no update; the tiny default model, `policy.model: tiny-default`,
warmed up for examples/gateway/openai_team.yaml, regime per_role: one policy per agent):

(a) gateway: examples/gateway/openai_team.py:run_episode, the plain `openai` client team, played by
    `ProgramWorkflow.play_episodes` with `task.branching: independent` and `task.check_determinism:
    false`: `--instances` N x `--k` K independent runs, every one a real HTTP round trip per call
    (planner: max_tokens 24, then solver: max_tokens 8), batched by the gateway's sampling worker.
(b) in-process: `teamrl.rollout.tree.run_episodes` (branches 1, the trajectory-GRPO path) over the
    same N x K episodes of `InProcessTeam` below, a built-in-style workflow that renders exactly the
    messages the program sends (the same system prompts, questions and "Plan: ..." line, from the
    example's own constants) with the same per-agent caps (planner 24 tokens, solver 8).

`--program shared-client` plays the same program with one change: its `OpenAI(base_url, api_key)`
is one client made once, re-pointed per episode with `with_options` (constructing an `OpenAI` client
costs about 34 ms of CPU here, nearly all of it httpx building an SSL context, even for http://).
That separates what the example's client-per-episode costs from what the gateway itself costs.

Both sides therefore sample N*K planner rows and N*K solver rows from the same two policies with the
same settings. By default every row runs to its cap (the policies' stop tokens are switched off), so
both sample exactly N*K*(24 + 8) tokens per round; `--natural-stops` keeps EOS (then token counts
differ a little between rounds and the throughput is still tokens per second).

Reported per side: sampled tokens per second of wall time and of CPU time (user + system of this
process, all its threads: the program runs, the HTTP server, the sampler; plus any children), rounds
alternating a/b/a/b after one warm-up each so that both see the same machine load; min / median / max
over rounds and the ratio of the medians (gateway / in-process). One torch thread. The load average
is quoted at start and end.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

import torch

from teamrl.config import load_config
from teamrl.gateway.program import ProgramWorkflow
from teamrl.gateway.runs import load_callable
from teamrl.policies.loading import Policy
from teamrl.rollout.agent_params import agent_sampling
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights, Sample, run_episodes
from teamrl.setup.team import build_policies, build_workflow
from teamrl.workflows.base import Agent, Outcome
from benchmarks.harness import add_out_argument, write_result

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gateway"
# The example's modules, imported the way a gateway config's task.entry imports them.
task_instances = load_callable(f"{EXAMPLE / 'team_task.py'}:instances", "team_task")
question = load_callable(f"{EXAMPLE / 'team_task.py'}:question", "team_task")
score = load_callable(f"{EXAMPLE / 'team_task.py'}:score", "team_task")
openai_team = sys.modules[load_callable(f"{EXAMPLE / 'openai_team.py'}:run_episode", "openai_team").__module__]

CONFIG = ROOT / "examples" / "gateway" / "openai_team.yaml"
CAPS = {"planner": 24, "solver": 8}  # the program's max_tokens per agent


class InProcessTeam:
    """The example program's planner + solver as a sequential built-in workflow: one turn, two agents."""

    parallel = False
    max_turns = 1

    def __init__(self) -> None:
        self.agents = [Agent("planner", "planner"), Agent("solver", "solver")]

    def new_state(self, split: str, index: int) -> dict[str, Any]:
        return {"instance": task_instances(split, index), "plan": None, "answer": None}

    def render(self, agent: str, state: dict[str, Any]) -> list[dict[str, str]]:
        """The messages the program sends for this agent."""
        ask = question(state["instance"])
        if agent == "planner":
            return [{"role": "system", "content": openai_team.PLANNER}, {"role": "user", "content": ask}]
        return [{"role": "system", "content": openai_team.SOLVER},
                {"role": "user", "content": f"{ask}\nPlan: {state['plan']}"}]

    def apply(self, agent: str, state: dict[str, Any], response: str) -> Outcome:
        if agent == "planner":
            state["plan"] = response
            return Outcome(team=0.0, local=0.0)
        state["answer"] = response
        result = score(state["instance"], state["plan"], response)
        return Outcome(team=result["team"], local=result["agents"]["solver"])

    def is_done(self, state: dict[str, Any]) -> bool:
        return state["answer"] is not None

    def success(self, state: dict[str, Any]) -> bool:
        return bool(score(state["instance"], state["plan"], state["answer"])["success"])


@dataclasses.dataclass
class Setup:
    """Both sides' workflows over the same loaded policies."""

    gateway: ProgramWorkflow
    in_process: InProcessTeam
    policies: dict[str, Policy]
    mapping: dict[str, str]
    gateway_params: dict[str, SamplingParams]
    in_process_params: dict[str, SamplingParams]


def share_one_client() -> None:
    """Make the example's `OpenAI(base_url=..., api_key=...)` re-point one shared client (no new httpx pool)."""
    shared = openai_team.OpenAI(base_url="http://127.0.0.1:1/v1", api_key="unused", max_retries=0)
    openai_team.OpenAI = lambda base_url, api_key: shared.with_options(base_url=base_url, api_key=api_key)


def build(natural_stops: bool, model_path: str | None = None) -> Setup:
    """The example config's policies (the tiny default, warmed up once and cached; or `model_path`) and
    both workflows."""
    example = ROOT / "examples" / "gateway"  # absolute: the script may run from any folder
    config = load_config(str(CONFIG), ["task.branching=independent", "task.check_determinism=false",
                                       f"task.entry={example / 'openai_team.py'}:run_episode",
                                       f"task.instances={example / 'team_task.py'}:instances",
                                       f"task.script={example / 'team_task.py'}:scripted"])
    workflow = build_workflow(config)
    assert isinstance(workflow, ProgramWorkflow)
    policies, mapping = build_policies(config, workflow, model_path=model_path, training=False)
    if not natural_stops:
        for policy in policies.values():  # every row runs to its cap: the same tokens on both sides
            policy.stop_token_ids = lambda: [-1]
    params = agent_sampling(config.rollout, workflow.agents)
    capped = {a: dataclasses.replace(p, max_new_tokens=CAPS[a]) for a, p in params.items()}
    return Setup(workflow, InProcessTeam(), policies, mapping, params, capped)


def cpu_seconds() -> float:
    """User + system seconds of this process (all threads) and its waited-for children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def rollout(setup: Setup, side: str, instances: list[int], seed: int) -> tuple[list[Sample], float, float]:
    """One rollout of `side`; (its samples, wall seconds, CPU seconds)."""
    generator = torch.Generator().manual_seed(seed)
    wall, cpu = time.perf_counter(), cpu_seconds()
    if side == "gateway":
        samples, _ = run_episodes(setup.gateway, instances, "train", setup.policies, setup.mapping,
                                  setup.gateway_params, 1, RewardWeights(), generator, random.Random(seed))
        dropped = setup.gateway.last_metrics.get("gateway/dropped_runs", 0.0)
        if dropped:
            raise RuntimeError(f"{dropped:.0f} gateway runs were dropped: the comparison would be unequal")
    else:
        samples, _ = run_episodes(setup.in_process, instances, "train", setup.policies, setup.mapping,
                                  setup.in_process_params, 1, RewardWeights(), generator, random.Random(seed))
    return samples, time.perf_counter() - wall, cpu_seconds() - cpu


def batching(setup: Setup) -> str:
    """The last gateway rollout's engine calls and mean batch (the worker's own metrics)."""
    metrics = setup.gateway.last_metrics
    return f"{metrics['gateway/engine_calls']:.0f} engine calls, mean batch {metrics['gateway/mean_batch']:.1f}"


def tokens_by_agent(samples: list[Sample]) -> dict[str, tuple[int, int]]:
    """Agent -> (rows, sampled tokens)."""
    out: dict[str, tuple[int, int]] = {}
    for s in samples:
        rows, tokens = out.get(s.agent, (0, 0))
        out[s.agent] = (rows + 1, tokens + len(s.generation.response_ids))
    return out


def commit() -> str:
    """The checkout's commit, marked when the measured files differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "src/teamrl/gateway", "src/teamrl/rollout",
                            "benchmarks/gateway_throughput.py"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return head + (" + uncommitted changes" if dirty else "")


def gateway_only(setup: Setup, instances: list[int], rounds: int) -> None:
    """`rounds` gateway rollouts and nothing else (after a warm-up): run under a sampling profiler."""
    rollout(setup, "gateway", instances, 0)
    for r in range(rounds):
        samples, wall, cpu = rollout(setup, "gateway", instances, 1 + r)
        print(f"gateway rollout {r + 1}: {len(samples)} rows, wall {wall:.3f} s, CPU {cpu:.3f} s; "
              f"{batching(setup)}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=int, default=8, help="task instances N per round")
    parser.add_argument("--k", type=int, default=4, help="runs per instance K")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--program", choices=("example", "shared-client"), default="example",
                        help="the example as written (a client per episode) or with one shared client")
    parser.add_argument("--natural-stops", action="store_true", help="keep EOS (rows may end before their cap)")
    parser.add_argument("--label", default="", help="a name for this measurement in the output (e.g. before)")
    add_out_argument(parser, "gateway_throughput")
    parser.add_argument("--model-path", default=None, help="a model folder instead of the warmed-up tiny default "
                        "(dry runs)")
    parser.add_argument("--gateway-only", type=int, default=0, metavar="ROUNDS",
                        help="only this many gateway rollouts (to profile them, e.g. under py-spy)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.program == "shared-client":
        share_one_client()
    setup = build(args.natural_stops, args.model_path)
    instances = [i for i in range(args.instances) for _ in range(args.k)]
    if args.gateway_only:
        gateway_only(setup, instances, args.gateway_only)
        return 0
    lines: list[str] = []

    def out(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    sides = ("gateway", "in-process")
    out(f"# gateway_throughput{' ' + args.label if args.label else ''}: commit {commit()}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start; {os.cpu_count()} cores; 1 torch thread")
    out(f"# model {args.model_path or 'tiny-default (warmed up for ' + CONFIG.name + ')'}: "
        f"{args.instances} instances x K {args.k} runs of planner (24 tokens) + solver (8 tokens), "
        f"{'natural stops' if args.natural_stops else 'every row to its cap'}; program: {args.program}; {args.rounds} rounds a/b/a/b after a warm-up each")
    for side in sides:
        rollout(setup, side, instances, 0)
    rates: dict[str, dict[str, list[float]]] = {s: {"wall": [], "cpu": []} for s in sides}
    for r in range(args.rounds):
        for side in sides:
            samples, wall, cpu = rollout(setup, side, instances, 1 + r)
            counts = tokens_by_agent(samples)
            tokens = sum(t for _, t in counts.values())
            rates[side]["wall"].append(tokens / wall)
            rates[side]["cpu"].append(tokens / cpu)
            out(f"round {r + 1} {side:10s} " + ", ".join(f"{a} {n} rows {t} tokens" for a, (n, t) in counts.items())
                + f"; wall {wall:.3f} s, CPU {cpu:.3f} s" + (f"; {batching(setup)}" if side == "gateway" else ""))
    for side in sides:
        for clock in ("wall", "cpu"):
            v = rates[side][clock]
            out(f"{side:10s} tokens/{clock} s: min {min(v):8.1f}  median {median(v):8.1f}  max {max(v):8.1f}")
    for clock in ("wall", "cpu"):
        ratio = median(rates["gateway"][clock]) / median(rates["in-process"][clock])
        out(f"ratio of medians (gateway / in-process), tokens per {clock} second: {ratio:.2f}")
    out(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end")
    write_result(args.out, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
