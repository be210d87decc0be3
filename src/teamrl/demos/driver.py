"""Play scripted episodes of any workflow and yield its demonstration triples.

The scripted agents of a task are one function `respond(agent, state, rng) -> response`; this
module drives them through episodes on training instances, the way the rollout driver would:
sequential workflows render each agent after the previous one's commit, parallel ones render
every agent of a turn before applying any. Used by the math and code demonstrations (the planning
tasks have their own drivers, written before this one).
"""

from __future__ import annotations

import collections
import dataclasses
import random
from collections.abc import Callable, Iterator
from typing import Any

from teamrl.workflows.base import Prompt, Workflow

Respond = Callable[[str, Any, random.Random], str]
"""(agent name, episode state, rng) -> the scripted agent's response."""


def play_episode(
    workflow: Workflow, state: Any, respond: Respond, rng: random.Random
) -> Iterator[tuple[str, Prompt, str]]:
    """Play `state` to its end, yielding (agent, prompt, response) for every response made."""
    for _ in range(workflow.max_turns):
        if workflow.is_done(state):
            return
        if workflow.parallel:
            turn = [(a.name, workflow.render(a.name, state)) for a in workflow.agents]
            replies = [(name, prompt, respond(name, state, rng)) for name, prompt in turn]
            for name, prompt, response in replies:
                yield name, prompt, response
                workflow.apply(name, state, response)
        else:
            for agent in workflow.agents:
                if workflow.is_done(state):
                    return
                prompt = workflow.render(agent.name, state)
                response = respond(agent.name, state, rng)
                yield agent.name, prompt, response
                workflow.apply(agent.name, state, response)


def scripted_team(scripts: dict[str, Callable[[Any, random.Random, Any], str]], skill: Any) -> Respond:
    """One `respond` from per-agent scripts `script(state, rng, skill) -> response`."""

    def respond(agent: str, state: Any, rng: random.Random) -> str:
        if agent not in scripts:
            raise ValueError(f"no scripted agent {agent!r}; scripted: {', '.join(scripts)}")
        return scripts[agent](state, rng, skill)

    return respond


def demonstrations(workflow: Workflow, seed: int, respond: Respond) -> Iterator[tuple[str, Prompt, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training instances.

    The scripted agents answer the compact prompts (the tiny model's) only.
    """
    if getattr(workflow, "prompt_style", "compact") != "compact":
        raise ValueError("scripted demonstrations answer compact prompts only (workflow.prompt_style=compact)")
    return _demonstrations(workflow, seed, respond)


def _demonstrations(workflow: Workflow, seed: int, respond: Respond) -> Iterator[tuple[str, Prompt, str]]:
    rng = random.Random(seed)
    index = seed * 1_000_003 % 10_000_000
    while True:
        index += 1
        yield from play_episode(workflow, workflow.new_state("train", index), respond, rng)


def scripted_success_rate(
    workflow: Workflow, respond: Respond, instances: int = 200, split: str = "heldout", seed: int = 0
) -> float:
    """Fraction of the first `instances` instances of `split` that the scripted agents solve."""
    if instances < 1:
        raise ValueError(f"instances must be >= 1, got {instances}")
    rng = random.Random(seed)
    states = [workflow.new_state(split, index) for index in range(instances)]
    for state in states:
        collections.deque(play_episode(workflow, state, respond, rng), maxlen=0)  # play it out
    return sum(bool(workflow.success(state)) for state in states) / instances


def check_probabilities(skill: Any) -> None:
    """Raise a ValueError naming each field of the dataclass `skill` that is not in [0, 1]."""
    for f in dataclasses.fields(skill):
        value = getattr(skill, f.name)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{type(skill).__name__}.{f.name} must be a probability in [0, 1], got {value}")
