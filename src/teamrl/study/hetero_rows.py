"""The heterogeneous-team rows: base A (the tiny default, a char-level Llama) and base B (the Qwen2 variant
over byte-level BPE, `teamrl.setup.variant_warmup`), warmed up with different emphasis.

Per seed, base B is warmed up with the seed's warm-up seed (as base A is), then each base's strength
on each role is measured on the validation split: the role's team term when the other roles are
played by a correct scripted agent (Split-Calc: the analyst's formula is right on every operand
pair; the calculator, given the right formula, answers the instance's value). Rows of kind `bases`:
  hetero: per-role AT-GRPO, base B on the role where its accuracy exceeds A's by the most, A elsewhere;
  homo_b: per-role AT-GRPO, base B on every role.
The homogeneous A pair is the study's `per_role` row. A study naming its base B (`Study.base_b`, e.g.
real_hetero_calc's Gemma-3-270M beside SmolLM2) loads it as it is: no warm-up for either base.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import time
from collections.abc import Callable
from statistics import mean
from typing import TYPE_CHECKING, Any

import torch

from teamrl.config import ConfigError, RunConfig
from teamrl.demos.strong import strong_team
from teamrl.policies.chat_encoding import PLAIN_TRANSCRIPT_STOP
from teamrl.policies.loading import Policy, load_policy, load_tokenizer
from teamrl.rollout.agent_params import agent_sampling
from teamrl.rollout.builtin_engine import SamplingParams, sample
from teamrl.setup.model_sources import resolve_model_source
from teamrl.setup.team import build_workflow
from teamrl.setup.variant_warmup import VariantRecipe, warm_up_variant
from teamrl.workflows.base import Workflow

if TYPE_CHECKING:  # the runner imports this module: a run-time import back would be circular
    from teamrl.study.rows import Row
    from teamrl.study.seed_run import SeedRun

Oracle = Callable[[str, Any, random.Random], str]
"""(agent, state, rng) -> a correct answer of that agent."""

B_STEPS_PER_A_STEP = 1.6
"""Base B's warm-up steps per step of base A's (`policy.warmup_sft_steps`; 500 -> 800). B's steps are
cheap (batch 32 of a 0.37M-parameter model over BPE tokens vs batch 64 of the 0.87M-parameter
default over characters: 183 s vs 586 s on this shared machine); at 150 or 400 steps its calculator
had not caught up with its 70% script (15% and 47% accuracy, docs/study/heterogeneous.md). Tied to
A's steps so a tiny-budget test turns both down together."""

STRENGTH_SAMPLES = 4
"""Sampled answers per validation instance and role when measuring a base's per-role accuracy."""


def oracle_for(task: str, workflow: Workflow) -> Oracle:
    """The task's strong scripted team (`teamrl.demos.strong`: the warm-up's scripts, every error off)."""
    try:
        return strong_team(task, workflow)
    except ValueError as err:
        raise ConfigError(
            f"the hetero rows measure each base's per-role accuracy against a correct scripted team: {err}"
        ) from None


def role_accuracy(
    workflow: Workflow,
    policy: Policy,
    agent: str,
    oracle: Oracle,
    instances: int,
    params: SamplingParams,
    samples: int,
    seed: int,
) -> float:
    """The share of `policy`'s sampled answers as `agent` whose team term is 1, on the first `instances`
    held-out instances, every agent before it answering as `oracle` does (one-turn sequential teams)."""
    names = [a.name for a in workflow.agents]
    if agent not in names:
        raise ValueError(f"agent {agent!r} is not in the workflow ({', '.join(names)})")
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    states = [workflow.new_state("heldout", i) for i in range(instances)]
    for before in names[: names.index(agent)]:
        for state in states:
            workflow.apply(before, state, oracle(before, state, rng))
    prompts = [policy.encode_prompt(workflow.render(agent, state)) for state in states]
    drawn = sample(policy, prompts, samples, params, generator)
    return float(
        mean(
            workflow.apply(agent, copy.deepcopy(state), g.text).team == 1.0
            for state, group in zip(states, drawn)
            for g in group
        )
    )  # mean of bools may be an int


def base_strengths(
    config: RunConfig, bases: dict[str, str], instances: int, seed: int, stops: dict[str, tuple[str, ...]] | None = None
) -> dict[str, dict[str, float]]:
    """base name -> agent -> accuracy (`role_accuracy` at the config's evaluation sampling, with the base's
    `stops` added to each role's stop strings)."""
    workflow = build_workflow(config)
    oracle = oracle_for(config.task["name"], workflow)
    params = agent_sampling(config.rollout, workflow.agents, "eval")
    strengths = {}
    for name, path in bases.items():
        # A named checkpoint (real_hetero_calc's bases) is converted once and loaded from its folder; the
        # chat template and system prompt are the config's, as in the training runs the strengths choose for.
        p = config.policy
        policy = load_policy(
            name,
            resolve_model_source(path),
            p.dtype,
            p.device,
            p.chat_template,
            system_prompt=p.system_prompt,
            cpu_linear=p.cpu_linear,
        )
        extra = (stops or {}).get(name, ())
        strengths[name] = {
            a.name: role_accuracy(
                workflow,
                policy,
                a.name,
                oracle,
                instances,
                dataclasses.replace(params[a.name], stop_strings=(*params[a.name].stop_strings, *extra)),
                STRENGTH_SAMPLES,
                seed,
            )
            for a in workflow.agents
        }
    return strengths


def hetero_assignment(strengths: dict[str, dict[str, float]]) -> dict[str, str]:
    """role -> base: B on the role where B's accuracy minus A's is largest (ties: the first role), A on
    the others, so the team always mixes the two bases.

    >>> hetero_assignment({"A": {"analyst": 0.6, "calculator": 0.4}, "B": {"analyst": 0.3, "calculator": 0.5}})
    {'analyst': 'A', 'calculator': 'B'}
    """
    roles = list(strengths["A"])
    if len(roles) < 2:
        raise ValueError(f"a heterogeneous team needs at least two roles, got {roles}")
    best_for_b = max(roles, key=lambda r: strengths["B"][r] - strengths["A"][r])
    return {role: "B" if role == best_for_b else "A" for role in roles}


def base_stops(paths: dict[str, str], named: set[str]) -> dict[str, tuple[str, ...]]:
    """base -> the stop strings its roles sample with: `PLAIN_TRANSCRIPT_STOP` for a named real checkpoint
    without a chat template (Gemma-3-270M base: without a stop its Split-Calc formula ran on into the next
    worked example, "x+y Operation: x plus y", which no verifier accepts), none otherwise. Only named bases
    (`Study.base_b`): the tiny study's warmed-up base B keeps its own stopping."""
    stops: dict[str, tuple[str, ...]] = {}
    for base, path in paths.items():
        plain = base in named and not load_tokenizer(base, resolve_model_source(path)).chat_template
        stops[base] = PLAIN_TRANSCRIPT_STOP if plain else ()
    return stops


def bases_overrides(
    assignment: dict[str, str], paths: dict[str, str], stops: dict[str, tuple[str, ...]] | None = None
) -> tuple[str, ...]:
    """Config overrides giving each role its own policy (named after the role) on its base's folder, and the
    stop strings of its base (`base_stops`) where it has any."""
    policies = ", ".join(f"{role}: {{model: {paths[base]}}}" for role, base in assignment.items())
    roles = ", ".join(f"{role}: {role}" for role in assignment)
    stop_overrides = tuple(
        f"rollout.by_role.{role}.stop={json.dumps(list(stops[base]))}"
        for role, base in assignment.items()
        if stops and stops.get(base)
    )
    return (f"policies={{{policies}}}", f"roles={{{roles}}}", *stop_overrides)


class HeteroBases:
    """One seed's base B and both bases' strengths, made once and shared by the seed's `bases` rows."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}
        self.strengths: dict[str, dict[str, float]] = {}
        self.stops: dict[str, tuple[str, ...]] = {}

    def make(self, run: "SeedRun", config: RunConfig) -> float:
        """Warm up B and measure both bases (once); returns the seconds spent (0 when already made)."""
        if not self.paths:
            started = time.time()
            b_path = run.study.base_b or self._warm_variant(run, config)
            self.paths = {"A": run.model_path, "B": b_path}
            self.stops = base_stops(self.paths, {"A", "B"} if run.study.base_b else set())
            self.strengths = base_strengths(config, self.paths, run.protocol.validation_instances, run.seed, self.stops)
            seconds = time.time() - started
            run.log(f"seed {run.seed}: per-role accuracy {self.strengths} ({seconds:.0f} s with B's warm-up)")
            return seconds
        return 0.0

    @staticmethod
    def _warm_variant(run: "SeedRun", config: RunConfig) -> str:
        """The seed's warmed-up Qwen2 variant (a study naming no base B; a named base B needs none)."""
        steps = max(1, round(B_STEPS_PER_A_STEP * config.policy.warmup_sft_steps))
        recipe = VariantRecipe.for_task(
            config.task, config.workflow.max_turns, steps=steps, seed=run.protocol.warmup_seed(run.seed)
        )
        run.log(f"seed {run.seed}: base B (Qwen2 variant) with warm-up seed {recipe.seed}")
        return str(warm_up_variant(recipe, verbose=run.verbose))


def produce(seed_run: "SeedRun", row: "Row") -> dict[str, Any]:
    """A `bases` row of one seed: the assignment, then a per-role training run like the `train` rows.

    The seed's first such row also warms up base B and measures the strengths: its `seconds` include
    `bases_seconds` (0 in the other row)."""
    bases = seed_run.shared.setdefault("bases", HeteroBases())  # B warmed and measured once per seed
    config = seed_run.config(row)
    spent = bases.make(seed_run, config)
    roles = [a.name for a in build_workflow(config).agents]
    if row.key == "hetero":
        assignment = hetero_assignment(bases.strengths)
    elif row.key == "homo_b":
        assignment = {role: "B" for role in roles}
    else:
        raise ConfigError(f"row {row.key!r} of kind bases: only hetero and homo_b are defined")
    result = seed_run._train(row, bases_overrides(assignment, bases.paths, bases.stops))
    return result | {
        "assignment": assignment,
        "strengths": bases.strengths,
        "base_b": bases.paths["B"],
        "bases_seconds": spent,
    }
