"""Samples -> rewards and group keys -> advantages written back onto the samples."""

from __future__ import annotations

import torch

from teamrl.algorithms.advantages import agentwise_scaled_advantages, group_ids, group_normalized_advantages
from teamrl.config import AlgorithmConfig
from teamrl.rollout.tree import Episode, Sample


def assign_advantages(samples: list[Sample], episodes: list[Episode], algo: AlgorithmConfig) -> dict[str, float]:
    """Set `sample.advantage` for every sample; returns advantage metrics.

    tree: groups are (instance, turn, agent) and rewards are each candidate's own.
    trajectory: one group per instance, the reward of every sample is its episode's return
    (sum of committed rewards over agents), normalised across the K episodes of the instance;
    with `trajectory_credit: per_agent`, one group per (instance, agent) and each agent's return
    is its own committed rewards plus the episode's success (`own`: without the success).
    With `agentwise_norm`, the centred rewards are divided by each agent's reward std over the batch
    instead of each group's (tree, and trajectory with per_agent credit).
    """
    if not samples:
        return {}
    if algo.objective == "rft":
        return success_advantages(samples, episodes)
    if algo.grouping == "tree":
        rewards = torch.tensor([s.reward for s in samples], dtype=torch.float64)
        adv, metrics = _normalize(rewards, group_ids([s.tree_key for s in samples]), [s.agent for s in samples], algo)
        for s, a in zip(samples, adv.tolist()):
            s.advantage = a
        return metrics
    if algo.grouping == "trajectory" and algo.trajectory_credit in ("per_agent", "own"):
        keys = list(dict.fromkeys((s.episode, s.agent) for s in samples))
        # own: the committed per-turn rewards alone, as tree grouping scores them (only the grouping differs)
        bonus = 1.0 if algo.trajectory_credit == "per_agent" else 0.0
        returns = torch.tensor(
            [episodes[e].rewards_by_agent.get(a, 0.0) + bonus * float(episodes[e].success) for e, a in keys],
            dtype=torch.float64,
        )
        adv, metrics = _normalize(
            returns, group_ids([(episodes[e].instance, a) for e, a in keys]), [a for _, a in keys], algo
        )
        by_key = dict(zip(keys, adv.tolist()))
        for s in samples:
            s.advantage = by_key[(s.episode, s.agent)]
        return metrics
    if algo.grouping == "trajectory":
        returns = torch.tensor([sum(e.rewards_by_agent.values()) for e in episodes], dtype=torch.float64)
        adv, metrics = group_normalized_advantages(
            returns, group_ids([e.instance for e in episodes]), algo.scale_by_std, algo.adv_eps
        )
        for s in samples:
            s.advantage = float(adv[s.episode])
        return metrics
    raise ValueError(f"unknown grouping {algo.grouping!r}; use tree or trajectory")


def _normalize(
    rewards: torch.Tensor, groups: torch.Tensor, agents: list[str], algo: AlgorithmConfig
) -> tuple[torch.Tensor, dict[str, float]]:
    """Group-normalised advantages; scaled by each agent's reward std instead with agentwise_norm."""
    if algo.agentwise_norm:
        return agentwise_scaled_advantages(rewards, groups, group_ids(agents), algo.adv_eps)
    return group_normalized_advantages(rewards, groups, algo.scale_by_std, algo.adv_eps)


def success_advantages(samples: list[Sample], episodes: list[Episode]) -> dict[str, float]:
    """The SFT baseline's credit: 1 for every response of a successful episode, 0 otherwise.

    With these advantages the PPO-clipped loss at ratio 1 has the gradient of the mean log-likelihood of
    the successful episodes' responses (token-mean aggregation: SFT's token-mean NLL), so the same update
    code fine-tunes on the team's own successes (rejection-sampling fine-tuning, filtered imitation).
    """
    for s in samples:
        s.advantage = 1.0 if episodes[s.episode].success else 0.0
    kept = sum(s.advantage for s in samples)
    return {
        "kept_fraction": kept / len(samples),
        "successful_episodes": sum(e.success for e in episodes) / max(len(episodes), 1),
    }


def trainable(samples: list[Sample], drop_zero_signal: bool) -> list[Sample]:
    """Samples that carry a gradient: zero-advantage ones only add noise to token-mean normalisers."""
    if not drop_zero_signal:
        return samples
    return [s for s in samples if s.advantage != 0.0]
