"""Trainer vs sampler log-probs of a step's samples: is the PPO ratio 1 at the start of the update?

The PPO ratio of a token is exp(trainer log-prob - sampling log-prob). Before the first optimizer
step it should be exactly 1; with another engine than the trainer's own forward (vLLM's kernels,
bfloat16, a stale weight sync) it drifts. `logprob_gap` re-scores a few samples of each policy with
the trainer's forward, on the weights they were sampled with (so: before the update), and reports
the mean and max |difference| per token, as verl logs `rollout_probs_diff`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from teamrl.policies.loading import Policy
from teamrl.policies.scoring import shared_prefix_logprobs
from teamrl.rollout.tree import Sample

GAP_SAMPLES = 32
"""Samples re-scored per policy per step: enough for a stable mean, a small share of an update's forward."""


def logprob_gap(policy: Policy, samples: Sequence[Sample], limit: int = GAP_SAMPLES) -> tuple[float, float] | None:
    """(mean, max) |trainer - sampler| log-prob per token over the first `limit` non-empty samples, or None."""
    chosen = [s.generation for s in samples if s.generation.response_ids][:limit]
    if not chosen:
        return None
    slot: dict[tuple[int, ...], int] = {}
    index = [slot.setdefault(tuple(g.prompt_ids), len(slot)) for g in chosen]
    temps = torch.tensor([g.temperature if g.temperature is not None else 1.0 for g in chosen])
    network = policy.model
    was_training = network.training
    network.eval()  # dropout off: the sampler had none
    with torch.no_grad():
        logp, mask, _ = shared_prefix_logprobs(
            network,
            [list(p) for p in slot],
            [g.response_ids for g in chosen],
            index,
            policy.tokenizer.pad_token_id,
            temps,
        )
    if was_training:
        network.train()
    old = torch.zeros_like(mask)
    for row, g in enumerate(chosen):
        old[row, : len(g.logprobs)] = torch.tensor(g.logprobs)
    diff = (logp.cpu() - old.cpu()).abs() * mask.cpu()
    return float(diff.sum() / mask.sum()), float(diff.max())


def gap_metrics(
    policies: dict[str, Policy], samples: Sequence[Sample], warn_above: float, only: Sequence[str] | None = None
) -> tuple[dict[str, float], dict[str, str]]:
    """`rollout/logprob_gap/<policy>` (mean) and `rollout/logprob_gap_max/<policy>` metrics, and a warning
    (policy -> message) for each policy whose mean gap exceeds `warn_above`.

    only: the policies to measure (default: all).
    """
    metrics, warnings = {}, {}
    for name in only if only is not None else policies:
        gap = logprob_gap(policies[name], [s for s in samples if s.policy == name])
        if gap is None:
            continue
        mean_gap, max_gap = gap
        metrics[f"rollout/logprob_gap/{name}"] = mean_gap
        metrics[f"rollout/logprob_gap_max/{name}"] = max_gap
        if mean_gap > warn_above:
            warnings[name] = (
                f"policy {name}: the sampler's log-probs differ from the trainer's by {mean_gap:.3g} per "
                f"token on average (max {max_gap:.3g}; threshold rollout.logprob_gap_warn = "
                f"{warn_above:g}), so the PPO ratio is off 1 before the update; check the dtype "
                "(float32 agrees to ~1e-6) and that weights reach the engine"
            )
    return metrics, warnings
