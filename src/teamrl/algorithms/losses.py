"""Policy-gradient losses: PPO clipped surrogate, KL (k3) and entropy terms, loss aggregations.

All inputs are [B, T] tensors with a {0,1} float `mask` of real response tokens.
"""

from __future__ import annotations

import torch

from teamrl.algorithms.registry import Registry

AGGREGATIONS: Registry = Registry("loss aggregation")


@AGGREGATIONS.register("token-mean")
def token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over all real tokens of the batch: long responses weigh more."""
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


@AGGREGATIONS.register("seq-mean-token-mean")
def seq_mean_token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over sequences of each sequence's token mean: every response weighs the same."""
    per_seq = (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    return per_seq.mean()


@AGGREGATIONS.register("seq-mean-token-sum")
def seq_mean_token_sum(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over sequences of each sequence's token sum."""
    return (values * mask).sum(-1).mean()


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    aggregation: str = "token-mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """-min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A), aggregated.

    advantages: [B] (one per response, broadcast over its tokens).
    """
    ratio = torch.exp(logp - old_logp)
    adv = advantages[:, None].to(logp.dtype)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    loss = AGGREGATIONS.get(aggregation)(per_token, mask)
    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)
        clip_frac = (((clipped < unclipped).float()) * mask).sum() / n
        approx_kl = ((old_logp - logp) * mask).sum() / n
        ratio_max = (ratio * mask).max()
    return loss, {"clip_frac": float(clip_frac), "approx_kl_old": float(approx_kl),
                  "ratio_max": float(ratio_max)}


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || ref): exp(ref - logp) - (ref - logp) - 1 (>= 0)."""
    diff = ref_logp - logp
    return torch.exp(diff) - diff - 1.0
