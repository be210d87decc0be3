"""Held-out evaluation: one sample per agent per turn, no branching."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from statistics import mean

import torch

from teamrl.policies.loading import Policy
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import Episode, RewardWeights, run_episodes
from teamrl.workflows.base import Workflow


def evaluate(
    workflow: Workflow,
    policies: dict[str, Policy],
    agent_to_policy: dict[str, str],
    instances: int,
    temperature: float = 0.0,
    max_new_tokens: int = 40,
    seed: int = 0,
    batch: int = 100,
    sampling: SamplingParams | Mapping[str, SamplingParams] | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> tuple[dict[str, float], list[Episode]]:
    """Success rate and returns on the first `instances` held-out instances.

    agent_to_policy: agent name -> policy name (see `teamrl.setup.team.agent_mapping`).
    sampling: every agent's settings, or agent name -> its own (the config's per-agent eval settings:
    `teamrl.rollout.agent_params.agent_sampling(config.rollout, workflow.agents, "eval")`); when
    given, `temperature` and `max_new_tokens` are not used.
    on_batch: called with the number of instances of each finished batch (a progress bar's update).
    """
    params = (
        sampling if sampling is not None else SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens)
    )
    generator = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    episodes: list[Episode] = []
    for start in range(0, instances, batch):
        ids = list(range(start, min(instances, start + batch)))
        _, eps = run_episodes(
            workflow, ids, "heldout", policies, agent_to_policy, params, 1, RewardWeights(), generator, rng
        )
        episodes.extend(eps)
        if on_batch is not None:
            on_batch(len(ids))
    if instances > 0 and not episodes:
        raise RuntimeError(
            f"the held-out evaluation played no episode of {instances}: the workflow dropped every one (a program "
            "task drops a run that crashed, exceeded task.timeout_s or reported no reward; the log has a warning "
            "for each, with its reason). Fix the program or raise task.timeout_s"
        )
    metrics = {
        # a run the workflow dropped (a program that crashed or timed out) counts as a failure: success is over
        # the instances asked for, so dropping the hard ones cannot raise it; the other means are over played ones
        "success": sum(e.success for e in episodes) / max(instances, 1),
        "dropped": float(instances - len(episodes)),
        "team_return": mean(e.team_return for e in episodes),
        "turns": mean(e.turns for e in episodes),
    }
    for agent in workflow.agents:
        metrics[f"reward/{agent.name}"] = mean(e.rewards_by_agent.get(agent.name, 0.0) for e in episodes)
    return metrics, episodes
