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
    log_ratio_clamp: float = 20.0,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """-min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A), aggregated.

    advantages: [B] (one per response, broadcast over its tokens). ratio = exp(clamp(logp - old_logp,
    +-log_ratio_clamp)): without the clamp a log-ratio of a few hundred overflows exp to inf, and
    inf * 0 (a zero advantage or a clipped branch) is NaN in the loss or its gradient. Padding positions
    (mask 0) are zeroed before anything is multiplied, so -inf or NaN log-probs there cannot leak into
    the loss, its gradient or the metrics.
    token_weights: [B, T] constant factors on each token's term (rollout correction's importance
    weights, `teamrl.algorithms.rollout_correction`); they must be finite at padding positions too.
    """
    real = mask > 0
    log_ratio = torch.where(real, logp - old_logp, torch.zeros_like(logp))
    log_ratio = log_ratio.clamp(-log_ratio_clamp, log_ratio_clamp)
    ratio = torch.exp(log_ratio)
    adv = advantages[:, None].to(logp.dtype)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = torch.where(real, -torch.minimum(unclipped, clipped), torch.zeros_like(unclipped))
    if token_weights is not None:
        per_token = per_token * token_weights.to(per_token.dtype).detach()
    loss = AGGREGATIONS.get(aggregation)(per_token, mask)
    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)
        clip_frac = ((clipped < unclipped) & real).float().sum() / n
        approx_kl = (-log_ratio * mask).sum() / n
        ratio_max = torch.where(real, ratio, torch.zeros_like(ratio)).max() if ratio.numel() else ratio.new_zeros(())
    return loss, {"clip_frac": float(clip_frac), "approx_kl_old": float(approx_kl), "ratio_max": float(ratio_max)}


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor, clamp: float = 10.0) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || ref): exp(d) - d - 1 with d = clamp(ref - logp, +-clamp) (>= 0).

    The clamp keeps exp finite when the policy has moved far from the reference on a token; non-finite
    differences (padding with -inf log-probs) give 0, so a masked aggregate stays finite.
    """
    diff = (ref_logp - logp).clamp(-clamp, clamp)
    diff = torch.where(torch.isfinite(diff), diff, torch.zeros_like(diff))
    return torch.exp(diff) - diff - 1.0
