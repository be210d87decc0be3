"""Rollout correction: importance weights pi_prox / mu for samples drawn by a sampler that is not the trainer.

mu is the behaviour policy (the log-probs the sampler reported), pi_prox the trainer's own weights
before the update (one no-grad forward). They differ when the sampler computes with other numerics
(bfloat16, vLLM's kernels) or samples with stale weights. Each registered correction turns the
per-token log-ratio log(pi_prox / mu) into per-token weights that multiply the PPO surrogate
(`decoupled_ppo_loss`), following truncated / masked importance sampling (Yao et al. 2025) and
decoupled PPO (Hilton et al. 2021):

- tis: min(rho, C) per token;
- mis: rho per token where 1/C <= rho <= C, 0 elsewhere (the token is dropped);
- seq_tis: min(g, C) for every token of a response, g the geometric mean of its tokens' rho;
- seq_mis: g for every token of a response whose g lies in [1/C, C], 0 for every token of one outside.

All inputs are [B, T] tensors with a {0,1} float `mask` of real response tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from teamrl.algorithms.losses import ppo_clip_loss
from teamrl.algorithms.registry import Registry


@dataclass
class CorrectionWeights:
    """What a correction made of each token's importance ratio."""

    weights: torch.Tensor  # [B, T] the factor on each token's surrogate (1 at padding)
    truncated: torch.Tensor  # [B, T] bool: the weight was lowered to the cap
    masked: torch.Tensor  # [B, T] bool: the token was dropped (weight 0)


CorrectionFn = Callable[[torch.Tensor, torch.Tensor, float], CorrectionWeights]
CORRECTIONS: Registry[CorrectionFn] = Registry("rollout correction")


def _check_cap(cap: float) -> None:
    if not cap > 1.0:
        raise ValueError(f"the importance-weight cap must be > 1 (it bounds the weight to [1/cap, cap]), got {cap}")


def sequence_log_ratio(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, 1]: the mean log-ratio over each response's real tokens (log of the geometric mean ratio; 0 if empty)."""
    count = mask.sum(-1, keepdim=True).clamp(min=1.0)
    return (log_ratio * mask).sum(-1, keepdim=True) / count


def _truncate(ratio: torch.Tensor, mask: torch.Tensor, cap: float) -> CorrectionWeights:
    real = mask > 0
    truncated = (ratio > cap) & real
    weights = torch.where(real, ratio.clamp(max=cap), torch.ones_like(ratio))
    return CorrectionWeights(weights, truncated, torch.zeros_like(real))


def _mask(ratio: torch.Tensor, mask: torch.Tensor, cap: float) -> CorrectionWeights:
    real = mask > 0
    masked = ((ratio > cap) | (ratio < 1.0 / cap)) & real
    weights = torch.where(masked, torch.zeros_like(ratio), torch.where(real, ratio, torch.ones_like(ratio)))
    return CorrectionWeights(weights, torch.zeros_like(real), masked)


@CORRECTIONS.register("tis")
def token_truncated(log_ratio: torch.Tensor, mask: torch.Tensor, cap: float) -> CorrectionWeights:
    """Truncated IS per token: w = min(pi_prox / mu, cap). Bounds the variance a rare token can add."""
    _check_cap(cap)
    return _truncate(torch.exp(log_ratio), mask, cap)


@CORRECTIONS.register("mis")
def token_masked(log_ratio: torch.Tensor, mask: torch.Tensor, cap: float) -> CorrectionWeights:
    """Masked IS per token: w = pi_prox / mu inside [1/cap, cap]; a token outside gets w = 0 (no gradient)."""
    _check_cap(cap)
    return _mask(torch.exp(log_ratio), mask, cap)


@CORRECTIONS.register("seq_tis")
def sequence_truncated(log_ratio: torch.Tensor, mask: torch.Tensor, cap: float) -> CorrectionWeights:
    """Truncated IS per response: every token gets min(g, cap), g = the geometric mean of its tokens' ratios."""
    _check_cap(cap)
    ratio = torch.exp(sequence_log_ratio(log_ratio, mask)).expand_as(log_ratio)
    return _truncate(ratio, mask, cap)


@CORRECTIONS.register("seq_mis")
def sequence_masked(log_ratio: torch.Tensor, mask: torch.Tensor, cap: float) -> CorrectionWeights:
    """Masked IS per response: every token gets g if g (geometric mean ratio) is in [1/cap, cap], else 0."""
    _check_cap(cap)
    ratio = torch.exp(sequence_log_ratio(log_ratio, mask)).expand_as(log_ratio)
    return _mask(ratio, mask, cap)


def rollout_correction_weights(
    prox_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    cap: float = 2.0,
    log_ratio_clamp: float = 20.0,
    staleness: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-token weights [B, T] from pi_prox (`prox_logp`) and mu (`behaviour_logp`), and their metrics.

    mode: a registered correction (tis, mis, seq_tis, seq_mis). log(pi_prox / mu) is clamped to
    +-log_ratio_clamp before exp, and padding positions (mask 0) are zeroed first, so -inf or NaN
    log-probs there cannot reach the weights. The weights carry no gradient.
    Metrics, over real tokens: is_weight_mean and is_weight_max (the weights applied, after
    truncation or masking), truncated_frac and masked_frac (shares of tokens lowered to the cap or
    dropped), and staleness (trainer weights version minus the sampler's) when it is given.
    """
    correction = CORRECTIONS.get(mode)
    with torch.no_grad():
        real = mask > 0
        log_ratio = torch.where(real, prox_logp - behaviour_logp, torch.zeros_like(prox_logp))
        log_ratio = log_ratio.clamp(-log_ratio_clamp, log_ratio_clamp)
        made = correction(log_ratio, mask, cap)
        metrics = correction_metrics(made, mask)
    if staleness is not None:
        metrics["staleness"] = float(staleness)
    return made.weights, metrics


def correction_metrics(made: CorrectionWeights, mask: torch.Tensor) -> dict[str, float]:
    """is_weight_mean / is_weight_max / truncated_frac / masked_frac over the real tokens of `mask`."""
    real = mask > 0
    n = float(real.sum())
    if n == 0:
        return {"is_weight_mean": 1.0, "is_weight_max": 1.0, "truncated_frac": 0.0, "masked_frac": 0.0}
    return {
        "is_weight_mean": float(made.weights[real].double().sum() / n),
        "is_weight_max": float(made.weights[real].max()),
        "truncated_frac": float(made.truncated.sum()) / n,
        "masked_frac": float(made.masked.sum()) / n,
    }


def decoupled_ppo_loss(
    logp: torch.Tensor,
    prox_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    is_weights: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    aggregation: str = "token-mean",
    log_ratio_clamp: float = 20.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Decoupled PPO: -w * min(r * A, clip(r, 1 - clip_low, 1 + clip_high) * A), aggregated.

    r = pi_theta / pi_prox (the trust region is around the trainer's weights before the update, not
    around the sampler), w = `is_weights` [B, T] (e.g. `rollout_correction_weights`), a constant.
    With w = 1 everywhere this is `ppo_clip_loss(logp, prox_logp, ...)`, bit for bit, gradients included.
    """
    return ppo_clip_loss(
        logp, prox_logp, advantages, mask, clip_low, clip_high, aggregation, log_ratio_clamp, token_weights=is_weights
    )
