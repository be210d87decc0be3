"""Group keys -> group ids -> normalised advantages. Pure functions on tensors."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch


def group_ids(keys: Sequence[Hashable]) -> torch.Tensor:
    """Contiguous group index [N] per key, in first-appearance order.

    AT-GRPO keys are (instance, turn, agent); trajectory-level GRPO keys are the instance alone.
    """
    index: dict[Hashable, int] = {}
    return torch.tensor([index.setdefault(k, len(index)) for k in keys], dtype=torch.long)


def _group_mean_std(values: torch.Tensor, groups: torch.Tensor, num: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-group mean [num] and population std [num] of float64 `values` [N]."""
    count = torch.zeros(num, dtype=torch.double).index_add_(0, groups, torch.ones_like(values))
    mean = torch.zeros(num, dtype=torch.double).index_add_(0, groups, values) / count
    var = torch.zeros(num, dtype=torch.double).index_add_(0, groups, (values - mean[groups]) ** 2) / count
    return mean, var.sqrt()


def _flat_groups(values: torch.Tensor, groups: torch.Tensor, num: int) -> torch.Tensor:
    """[num] bool: the groups whose values are all equal (exactly, not up to rounding)."""
    high = torch.full((num,), -torch.inf, dtype=torch.double).scatter_reduce(0, groups, values, "amax")
    low = torch.full((num,), torch.inf, dtype=torch.double).scatter_reduce(0, groups, values, "amin")
    return high == low


def _check_rewards(rewards: torch.Tensor, groups: torch.Tensor) -> None:
    if rewards.shape != groups.shape or rewards.dim() != 1:
        raise ValueError(f"rewards {tuple(rewards.shape)} and groups {tuple(groups.shape)} must be equal 1-D")
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards contain NaN or inf; check the reward function")


def _advantage_metrics(adv: torch.Tensor, flat: torch.Tensor) -> dict[str, float]:
    num = len(flat)
    return {
        "groups": float(num),
        "zero_signal_frac": float(flat.double().mean()) if num else 0.0,
        "adv_mean": float(adv.mean()) if len(adv) else 0.0,
        "adv_std": float(adv.std(unbiased=False)) if len(adv) else 0.0,
        "adv_abs_max": float(adv.abs().max()) if len(adv) else 0.0,
    }


def group_normalized_advantages(
    rewards: torch.Tensor, groups: torch.Tensor, scale_by_std: bool = True, eps: float = 1e-6
) -> tuple[torch.Tensor, dict[str, float]]:
    """A = (r - mean_g) / (std_g + eps), or r - mean_g without std scaling (Dr. GRPO).

    rewards: [N] float; groups: [N] long in 0..G-1. std is the population std of the group
    (a singleton group has std 0 and advantage 0). Returns the advantages [N] and metrics,
    among them the fraction of groups whose rewards are all equal (no learning signal).
    """
    _check_rewards(rewards, groups)
    rewards = rewards.double()
    num = int(groups.max()) + 1 if len(groups) else 0
    mean, std = _group_mean_std(rewards, groups, num)
    centred = rewards - mean[groups]
    adv = centred / (std[groups] + eps) if scale_by_std else centred
    # A group of equal rewards carries no signal: its advantages are exactly 0, not the rounding
    # error of its mean (0.1 * 3 / 3 != 0.1), so that drop_zero_signal can leave it out.
    flat = _flat_groups(rewards, groups, num)
    adv = torch.where(flat[groups], torch.zeros_like(adv), adv)
    return adv.float(), _advantage_metrics(adv, flat)


def agentwise_scaled_advantages(
    rewards: torch.Tensor, groups: torch.Tensor, agents: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, dict[str, float]]:
    """A = (r - mean_g) / (std_agent + eps): centred in its group, scaled by its agent's reward std (Dr. MAS).

    rewards: [N]; groups: [N] long (the GRPO groups, e.g. (instance, turn, agent)); agents: [N] long.
    std_agent is the population std of all of that agent's rewards in the batch, across its groups.
    Dr. MAS normalises each agent's advantages with the agent's own reward statistics so that no
    agent's reward scale sets the size of the update. With AT-GRPO's groups every group already holds
    one agent, so a per-agent *pre*-normalisation is undone by the per-group std; here the per-group
    std is *replaced*: within an agent, a group whose rewards barely differ gets small advantages
    (instead of being blown up to unit scale), while across agents the scales are equalised.
    """
    _check_rewards(rewards, groups)
    if agents.shape != groups.shape:
        raise ValueError(f"agents {tuple(agents.shape)} and groups {tuple(groups.shape)} must be equal 1-D")
    rewards = rewards.double()
    num = int(groups.max()) + 1 if len(groups) else 0
    num_agents = int(agents.max()) + 1 if len(agents) else 0
    mean, _ = _group_mean_std(rewards, groups, num)
    _, agent_std = _group_mean_std(rewards, agents, num_agents)
    adv = (rewards - mean[groups]) / (agent_std[agents] + eps)
    flat = _flat_groups(rewards, groups, num)
    adv = torch.where(flat[groups], torch.zeros_like(adv), adv)
    return adv.float(), _advantage_metrics(adv, flat)
