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


def group_normalized_advantages(
    rewards: torch.Tensor, groups: torch.Tensor, scale_by_std: bool = True, eps: float = 1e-6
) -> tuple[torch.Tensor, dict[str, float]]:
    """A = (r - mean_g) / (std_g + eps), or r - mean_g without std scaling (Dr. GRPO).

    rewards: [N] float; groups: [N] long in 0..G-1. std is the population std of the group
    (a singleton group has std 0 and advantage 0). Returns the advantages [N] and metrics,
    among them the fraction of groups whose rewards are all equal (no learning signal).
    """
    if rewards.shape != groups.shape or rewards.dim() != 1:
        raise ValueError(f"rewards {tuple(rewards.shape)} and groups {tuple(groups.shape)} must be equal 1-D")
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards contain NaN or inf; check the reward function")
    rewards = rewards.double()
    num = int(groups.max()) + 1 if len(groups) else 0
    count = torch.zeros(num, dtype=torch.double).index_add_(0, groups, torch.ones_like(rewards))
    mean = torch.zeros(num, dtype=torch.double).index_add_(0, groups, rewards) / count
    centred = rewards - mean[groups]
    var = torch.zeros(num, dtype=torch.double).index_add_(0, groups, centred**2) / count
    std = var.sqrt()
    adv = centred / (std[groups] + eps) if scale_by_std else centred
    # A group of equal rewards carries no signal: its advantages are exactly 0, not the rounding
    # error of its mean (0.1 * 3 / 3 != 0.1), so that drop_zero_signal can leave it out.
    high = torch.full((num,), -torch.inf, dtype=torch.double).scatter_reduce(0, groups, rewards, "amax")
    low = torch.full((num,), torch.inf, dtype=torch.double).scatter_reduce(0, groups, rewards, "amin")
    flat = high == low
    adv = torch.where(flat[groups], torch.zeros_like(adv), adv)
    metrics = {
        "groups": float(num),
        "zero_signal_frac": float(flat.double().mean()) if num else 0.0,
        "adv_mean": float(adv.mean()) if len(adv) else 0.0,
        "adv_std": float(adv.std(unbiased=False)) if len(adv) else 0.0,
        "adv_abs_max": float(adv.abs().max()) if len(adv) else 0.0,
    }
    return adv.float(), metrics


def agentwise_normalized_rewards(
    rewards: torch.Tensor, agents: torch.Tensor, eps: float = 1e-6
) -> torch.Tensor:
    """Standardise each agent's rewards by that agent's own mean and std (Dr. MAS style).

    Applied before grouping, it keeps one agent's reward scale from dominating the update.
    """
    normed, _ = group_normalized_advantages(rewards, agents, scale_by_std=True, eps=eps)
    return normed
