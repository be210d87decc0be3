"""pi_prox for rollout correction: the trainer's log-probs of an update batch, before its first optimizer step.

`algorithm.rollout_correction` (other than none) takes the PPO ratio against these instead of the
sampler's log-probs, and weights each token by pi_prox / mu (`teamrl.algorithms.rollout_correction`).
They come from one no-grad forward over the batch in evaluation mode (no dropout, as the sampler),
in the update's precision (`algorithm.autocast`) and cut into the update's micro-batches, so the
forward holds no more activations than the update's own.

When the update makes one pass with one optimizer step (one epoch, one minibatch) and the model has
no active dropout, every forward of the update runs on the weights before that step: its log-probs
are pi_prox already, so `from_first_forward` takes them (detached) from there and the extra forward
is skipped (`training.update.one_step_update` decides).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from teamrl.algorithms.rollout_correction import rollout_correction_weights
from teamrl.config import AlgorithmConfig
from teamrl.policies.loading import Policy
from teamrl.policies.scoring import bf16_body, shared_prefix_logprobs
from teamrl.rollout.tree import Sample
from teamrl.training.micro_batches import length_buckets, plan_micro_batches


@dataclass
class ScoringLayout:
    """A list of samples as `shared_prefix_logprobs` takes them: each distinct prompt once."""

    prompts: list[list[int]]  # G distinct prompts
    responses: list[list[int]]  # N responses
    index: list[int]  # [N] prompt of each response
    temperature: float | torch.Tensor  # one for all, or [N]


def scoring_layout(samples: list[Sample], temperature: float) -> ScoringLayout:
    """Samples laid out for scoring, each at the temperature its log-probs were sampled at (per-agent settings)."""
    gens = [s.generation for s in samples]
    temps = [g.temperature if g.temperature is not None else temperature for g in gens]
    slot: dict[tuple[int, ...], int] = {}
    index = [slot.setdefault(tuple(g.prompt_ids), len(slot)) for g in gens]
    return ScoringLayout(
        [list(p) for p in slot],
        [g.response_ids for g in gens],
        index,
        temps[0] if len(set(temps)) == 1 else torch.tensor(temps),
    )


def sample_micro_batches(samples: list[Sample], algo: AlgorithmConfig) -> list[list[int]]:
    """Row indices of `samples` per micro-batch, as the update cuts a part (`algorithm.micro_batch_tokens`)."""
    return plan_micro_batches(
        [tuple(s.generation.prompt_ids) for s in samples],
        [len(s.generation.response_ids) for s in samples],
        algo.micro_batch_tokens,
        algo.bucket_call_tokens if algo.length_buckets else None,
    )


def response_buckets(layout: ScoringLayout, algo: AlgorithmConfig) -> list[list[int]] | None:
    """The length buckets one scoring call splits its responses into (None: `algorithm.length_buckets` off)."""
    if not algo.length_buckets:
        return None
    return length_buckets([len(r) for r in layout.responses], algo.bucket_call_tokens)


def padded(rows: Sequence[list[float] | torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """Per-sample log-probs as a [N, T] tensor shaped, typed and placed as `like` (zeros past each row's end)."""
    out = torch.zeros_like(like)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(row, dtype=out.dtype)
    return out


@dataclass
class ProximalLogprobs:
    """pi_prox of every sample of one update batch, and the correction settings that use them."""

    logprobs: dict[int, torch.Tensor]  # id(sample) -> [T] the trainer's log-probs of its response (CPU)
    mode: str  # algorithm.rollout_correction
    cap: float  # algorithm.rollout_correction_cap
    log_ratio_clamp: float
    from_update: bool = False  # filled by the update's own forward (`take`) instead of an extra one

    def of(self, samples: list[Sample], like: torch.Tensor) -> torch.Tensor:
        """[N, T] pi_prox of `samples`, shaped and placed as the update's log-probs `like`."""
        return padded([self.logprobs[id(s)] for s in samples], like)

    def take(self, samples: list[Sample], logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[N, T] pi_prox of `samples` for the loss whose forward gave `logp` [N, T] (with gradient).

        from_update: pi_prox is that forward's log-probs, detached (the caller guarantees no optimizer
        step came before it), and each row is kept for the batch's metrics; otherwise the extra
        forward's rows.
        """
        if not self.from_update:
            return self.of(samples, mask)
        prox = torch.where(mask > 0, logp.detach(), torch.zeros_like(mask)).to(mask.dtype)
        rows = prox.float().cpu()
        for row, sample in enumerate(samples):
            self.logprobs[id(sample)] = rows[row, : len(sample.generation.response_ids)].clone()
        return prox

    def weights(
        self, prox: torch.Tensor, behaviour: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The importance weights [N, T] of pi_prox over mu (the sampler's log-probs) and their metrics."""
        return rollout_correction_weights(prox, behaviour, mask, self.mode, self.cap, self.log_ratio_clamp)


def dropout_active(model: torch.nn.Module) -> bool:
    """Whether a forward in training mode would drop units (a Dropout module or a config rate above 0)."""
    if any(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()):
        return True
    # attention dropout is often a functional call with a rate read from the HF config
    config = getattr(model, "config", None)
    rates = vars(config).items() if config is not None else []
    return any(("dropout" in k or "pdrop" in k) and isinstance(v, float) and v > 0 for k, v in rates)


def from_first_forward(algo: AlgorithmConfig) -> ProximalLogprobs:
    """An empty ProximalLogprobs that the update's forwards fill (`take`): no extra forward."""
    return ProximalLogprobs({}, algo.rollout_correction, algo.rollout_correction_cap, algo.log_ratio_clamp, True)


def proximal_logprobs(
    policy: Policy, samples: list[Sample], algo: AlgorithmConfig, temperature: float
) -> ProximalLogprobs:
    """One no-grad forward of the trainer's current weights over `samples`: call before any optimizer step."""
    model, pad_id = policy.model, policy.tokenizer.pad_token_id
    plan = sample_micro_batches(samples, algo)
    was_training = model.training
    model.eval()  # dropout off: the sampler had none
    out: dict[int, torch.Tensor] = {}
    try:
        with torch.no_grad(), bf16_body(model, algo.autocast == "bf16"):
            for rows in plan:
                micro = [samples[i] for i in rows]
                layout = scoring_layout(micro, temperature)
                buckets = response_buckets(layout, algo)
                logp, _, _ = shared_prefix_logprobs(
                    model,
                    layout.prompts,
                    layout.responses,
                    layout.index,
                    pad_id,
                    layout.temperature,
                    response_buckets=buckets,
                )
                logp = logp.float().cpu()
                for row, sample in enumerate(micro):
                    out[id(sample)] = logp[row, : len(sample.generation.response_ids)].clone()
    finally:
        if was_training:
            model.train()
    return ProximalLogprobs(out, algo.rollout_correction, algo.rollout_correction_cap, algo.log_ratio_clamp)


def correction_metrics(proximal: ProximalLogprobs, samples: list[Sample]) -> dict[str, float]:
    """The weights' metrics over the whole batch, `rollout_correction/<metric>` (the loop adds the policy)."""
    real = [s for s in samples if s.generation.response_ids]
    if not real:
        return {}
    rows = [proximal.logprobs[id(s)] for s in real]
    width = max(len(r) for r in rows)
    mask = torch.zeros(len(real), width)
    for i, r in enumerate(rows):
        mask[i, : len(r)] = 1.0
    prox = padded(rows, mask)
    behaviour = padded([s.generation.logprobs for s in real], mask)
    _, metrics = proximal.weights(prox, behaviour, mask)
    return {f"rollout_correction/{key}": value for key, value in metrics.items()}
