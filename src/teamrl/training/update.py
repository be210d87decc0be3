"""One policy's update from its samples: PPO-clipped policy gradient in minibatches."""

from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass, replace

import torch

from teamrl.algorithms.losses import AGGREGATIONS, kl_k3, ppo_clip_loss
from teamrl.config import AlgorithmConfig, PolicyConfig, TrainConfig
from teamrl.diagnostics.gradients import RoleGradients
from teamrl.policies.loading import Policy
from teamrl.policies.lora import AdaptersDisabled, adapter_parameters
from teamrl.policies.scoring import bf16_body, shared_prefix_logprobs
from teamrl.rollout.sampler import note_update
from teamrl.rollout.tree import Sample
from teamrl.training.data_parallel import GradSync
from teamrl.training.memory import PeakMemory
from teamrl.training.proximal import (
    ProximalLogprobs,
    correction_metrics,
    dropout_active,
    from_first_forward,
    padded,
    proximal_logprobs,
    response_buckets,
    sample_micro_batches,
    scoring_layout,
)


@dataclass
class PolicyOptimizer:
    """A policy's optimizer, schedule and (optional) frozen reference."""

    policy: Policy
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    reference: torch.nn.Module | None
    grad_sync: GradSync | None = None  # set on each worker of a data-parallel group


def adamw(params: list[torch.nn.Parameter], lr: float, weight_decay: float, impl: str = "fused") -> torch.optim.AdamW:
    """AdamW with the `train.adamw` implementation: fused, foreach or for-loop (see TrainConfig.adamw)."""
    if impl not in ("fused", "foreach", "for-loop"):
        raise ValueError(f"AdamW implementation {impl!r} unknown; use fused, foreach or for-loop")
    if impl == "fused":
        try:
            return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)
        except (RuntimeError, TypeError):  # no fused kernel for this device or dtype in this torch
            impl = "foreach"
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, foreach=impl == "foreach")


def make_optimizer(policy: Policy, pcfg: PolicyConfig, tcfg: TrainConfig, with_reference: bool) -> PolicyOptimizer:
    """AdamW over what `policy` trains (a LoRA policy: only its own adapter) with the LR schedule.

    with_reference: keep a frozen copy of the initial policy for a KL anchor. A LoRA policy's
    reference is its base with the adapters switched off, which costs no memory.
    """
    if policy.adapter is not None:
        params = adapter_parameters(policy.model, policy.adapter)
    else:
        params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = adamw(params, pcfg.lr, pcfg.weight_decay, tcfg.adamw)

    def lr_factor(step: int) -> float:
        if step < tcfg.warmup_steps:
            return (step + 1) / tcfg.warmup_steps
        if tcfg.schedule == "cosine":
            progress = (step - tcfg.warmup_steps) / max(1, tcfg.steps - tcfg.warmup_steps)
            return 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
        return 1.0

    reference = None
    if with_reference and policy.adapter is not None:
        reference = AdaptersDisabled(policy.model)
    elif with_reference:
        reference = copy.deepcopy(policy.model).eval().requires_grad_(False)
    return PolicyOptimizer(policy, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor), reference)


def update_policy(
    state: PolicyOptimizer,
    samples: list[Sample],
    algo: AlgorithmConfig,
    temperature: float,
    grad_clip: float,
    rng: random.Random,
    tracker: RoleGradients | None = None,
    reuse_forward: bool = True,
) -> dict[str, float]:
    """Run `ppo_epochs` passes of minibatch updates over `samples`; returns averaged metrics.

    With a `tracker` (or a per-role mitigation on) each minibatch is backpropagated agent by agent
    so the tracker sees every role's own gradient; read its per-role metrics with
    `tracker.end_step()` afterwards. Without one, the whole minibatch is one part. Each part is
    laid out by length and by `algo.micro_batch_tokens` (`teamrl.training.micro_batches`) and
    backpropagated micro-batch by micro-batch.
    `peak_memory_mb` in the result: the update's peak memory (`teamrl.training.memory`).
    With `algo.rollout_correction` set, the samples are scored with the current weights (pi_prox,
    `teamrl.training.proximal`): the PPO ratio is taken against those, each token is weighted by its
    importance weight pi_prox / mu, and the weights' metrics come back as `rollout_correction/<metric>`.
    pi_prox comes from one extra no-grad forward before the first optimizer step, or, when the update is
    one optimizer step (`one_step_update`) and `reuse_forward` is on, from that step's own forwards.
    """
    model, tok = state.policy.model, state.policy.tokenizer
    model.train()
    if tracker is not None:
        tracker.begin_step()
    totals: dict[str, float] = {}
    steps = 0
    proximal = None
    with PeakMemory(next(model.parameters()).device) as peak:
        chunks = _minibatches(samples, algo.minibatch_size, rng)  # the first epoch's (no RNG use comes between)
        if algo.rollout_correction != "none" and samples:
            if reuse_forward and one_step_update(state, algo, len(chunks)):
                proximal = from_first_forward(algo)
            else:
                proximal = proximal_logprobs(state.policy, samples, algo, temperature)  # before any optimizer step
        for epoch in range(algo.ppo_epochs):
            for chunk in chunks if epoch == 0 else _minibatches(samples, algo.minibatch_size, rng):
                metrics = _minibatch_step(
                    state, chunk, algo, temperature, grad_clip, tok.pad_token_id, tracker, proximal
                )
                for key, value in metrics.items():
                    totals[key] = totals.get(key, 0.0) + value
                steps += 1
    correction = correction_metrics(proximal, samples) if proximal is not None else {}
    state.scheduler.step()
    out = {key: value / max(steps, 1) for key, value in totals.items()}
    out["peak_memory_mb"] = peak.mb
    out["lr"] = state.optimizer.param_groups[0]["lr"]
    out["samples"] = float(len(samples))
    return out | correction


def one_step_update(state: PolicyOptimizer, algo: AlgorithmConfig, minibatches: int) -> bool:
    """Whether every forward of the update runs on the weights before its first optimizer step, in
    evaluation-equivalent arithmetic, so its log-probs are pi_prox: one epoch of one minibatch, no
    active dropout, and no data-parallel group (whose workers each see only their share of the batch)."""
    return (
        algo.ppo_epochs == 1 and minibatches == 1 and state.grad_sync is None and not dropout_active(state.policy.model)
    )


def _minibatches(samples: list[Sample], size: int, rng: random.Random) -> list[list[Sample]]:
    """Shuffled minibatches that keep samples of one prompt together, so the prompt is encoded once."""
    by_prompt: dict[tuple[int, ...], list[Sample]] = {}
    for s in samples:
        by_prompt.setdefault(tuple(s.generation.prompt_ids), []).append(s)
    groups = list(by_prompt.values())
    rng.shuffle(groups)
    batches: list[list[Sample]] = []
    current: list[Sample] = []
    for group in groups:
        if current and len(current) + len(group) > size:
            batches.append(current)
            current = []
        current.extend(group)
    if current:
        batches.append(current)
    return batches


def role_parts(chunk: list[Sample]) -> list[tuple[str, list[tuple[str, list[Sample]]]]]:
    """[(role, [(agent, samples), ...]), ...] in first-appearance order.

    A prompt belongs to one agent, so the split keeps each prompt's candidates together.
    """
    roles: dict[str, dict[str, list[Sample]]] = {}
    for s in chunk:
        roles.setdefault(s.role, {}).setdefault(s.agent, []).append(s)
    return [(role, list(agents.items())) for role, agents in roles.items()]


def _units(samples: list[Sample], aggregation: str) -> float:
    """What the aggregation averages over: tokens (token-mean) or sequences (the seq-mean ones)."""
    if aggregation == "token-mean":
        return float(sum(len(s.generation.response_ids) for s in samples))
    return float(len(samples))


def _kl_coef(algo: AlgorithmConfig, role: str | None) -> float:
    return float(algo.kl_coef_by_role.get(role, algo.kl_coef)) if role is not None else algo.kl_coef


def _minibatch_step(
    state: PolicyOptimizer,
    chunk: list[Sample],
    algo: AlgorithmConfig,
    temperature: float,
    grad_clip: float,
    pad_id: int,
    tracker: RoleGradients | None = None,
    proximal: ProximalLogprobs | None = None,
) -> dict[str, float]:
    """One optimizer step on `chunk`, backpropagated part by part.

    The loss of a part is its aggregate times the part's weight: its share of the chunk's tokens
    (token-mean) or sequences (seq-mean-*), so the parts' gradients sum to the one-backward
    gradient; with `role_balanced` every role present gets weight 1/R, split among its agents
    by their share of the role's tokens/sequences. Each part is backpropagated micro-batch by
    micro-batch (`_backward_part`), so no more than one micro-batch's activations live at once.
    """
    if state.grad_sync is not None and state.grad_sync.lockstep:
        # FSDP: every worker must run the same forwards (each one gathers the others' shards), and
        # the micro-batch and bucket layouts depend on a worker's own share: one call per part instead.
        algo = replace(algo, micro_batch_tokens=0, length_buckets=False)
    split = tracker is not None or algo.role_balanced or bool(algo.kl_coef_by_role)
    parts = role_parts(chunk) if split else [(None, [(None, chunk)])]
    total_units = max(_units(chunk, algo.aggregation), 1.0)
    state.optimizer.zero_grad(set_to_none=True)
    sums: dict[str, float] = {}
    ratio_max, tokens = 0.0, 0.0
    for role, agents in parts:
        role_units = max(sum(_units(part, algo.aggregation) for _, part in agents), 1.0)
        for agent, part in agents:
            units = _units(part, algo.aggregation)
            weight = units / role_units / len(parts) if algo.role_balanced else units / total_units
            if state.grad_sync is not None:  # data parallel: score only this worker's share
                share, weight = state.grad_sync.shard(part, weight, lambda p: _units(p, algo.aggregation))
                if not share:
                    if state.grad_sync.lockstep:  # FSDP: the others' forward needs this worker's shards
                        _part_loss(state, part[:1], algo, temperature, pad_id, 0.0, _kl_coef(algo, role), proximal)[
                            0
                        ].backward()
                    continue
                part = share
            loss, metrics, n, part_ratio_max = _backward_part(
                state, part, algo, temperature, pad_id, weight, _kl_coef(algo, role), proximal
            )
            ratio_max = max(ratio_max, part_ratio_max)
            sums["loss"] = sums.get("loss", 0.0) + loss
            for key, value in metrics.items():
                sums[key] = sums.get(key, 0.0) + value * n
            tokens += n
            if tracker is not None:
                assert role is not None and agent is not None  # a tracker splits the chunk by role and agent
                tracker.agent_done(role, agent, metrics, n, len(part))
        if tracker is not None:
            assert role is not None
            tracker.role_done(role)
    if tracker is not None:
        tracker.finish_minibatch()
    if state.grad_sync is not None:
        state.grad_sync.reduce_gradients(state.policy.model)
        sums, tokens, ratio_max = state.grad_sync.reduce_sums(sums, tokens, ratio_max)
    params = [p for p in state.policy.model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else float("inf"))
    state.optimizer.step()
    note_update(state.policy)  # engines with a copy of the weights see the change (rollout.sampler)
    out = {key: (value if key == "loss" else value / max(tokens, 1.0)) for key, value in sums.items()}
    out.update(ratio_max=ratio_max, grad_norm=float(norm), response_tokens=tokens)
    return out


def _backward_part(
    state: PolicyOptimizer,
    part: list[Sample],
    algo: AlgorithmConfig,
    temperature: float,
    pad_id: int,
    weight: float,
    kl_coef: float,
    proximal: ProximalLogprobs | None = None,
) -> tuple[float, dict[str, float], float, float]:
    """Backpropagate `weight` x the part's loss, one micro-batch at a time (gradients accumulate).

    A micro-batch's loss is its own aggregate times its share of the part's units (tokens for
    token-mean, sequences for the seq-means), as in `GradSync.shard`: each aggregation is a sum
    over units divided by their count, so the shares' gradients sum to the whole part's.
    Returns (the part's weighted loss, its token-mean metrics, its tokens, its largest ratio).
    """
    total = _units(part, algo.aggregation)
    plan = sample_micro_batches(part, algo)
    loss_value, tokens, ratio_max = 0.0, 0.0, 0.0
    sums: dict[str, float] = {}
    for rows in plan:
        micro = [part[i] for i in rows]
        share = _units(micro, algo.aggregation) / total if total else len(micro) / len(part)
        loss, metrics = _part_loss(state, micro, algo, temperature, pad_id, weight * share, kl_coef, proximal)
        loss.backward()
        n = metrics.pop("tokens")
        ratio_max = max(ratio_max, float(metrics.pop("ratio_max")))
        loss_value += float(loss.detach())
        for key, value in metrics.items():
            sums[key] = sums.get(key, 0.0) + value * n
        tokens += n
    return loss_value, {key: value / max(tokens, 1.0) for key, value in sums.items()}, tokens, ratio_max


def _part_loss(
    state: PolicyOptimizer,
    part: list[Sample],
    algo: AlgorithmConfig,
    temperature: float,
    pad_id: int,
    weight: float,
    kl_coef: float,
    proximal: ProximalLogprobs | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """weight * (PPO surrogate - entropy_coef * entropy + kl_coef * KL(pi || ref)) of one part.

    proximal: pi_prox of the batch (rollout correction): the surrogate is decoupled PPO, its ratio
    taken against pi_prox and each token weighted by pi_prox / mu; None: against the sampler's mu.
    """
    layout = scoring_layout(part, temperature)
    prompts, responses, index = layout.prompts, layout.responses, layout.index
    row_temperature = layout.temperature  # the part's temperature, or one per row where rows differ
    buckets = response_buckets(layout, algo)
    bf16 = algo.autocast == "bf16"
    with bf16_body(state.policy.model, bf16):
        logp, mask, entropy = shared_prefix_logprobs(
            state.policy.model,
            prompts,
            responses,
            index,
            pad_id,
            row_temperature,
            with_entropy=True,
            response_buckets=buckets,
            entropy_grad=bool(algo.entropy_coef),
        )
    old = padded([s.generation.logprobs for s in part], mask)  # mu: the sampler's log-probs
    is_weights = None
    if proximal is not None:
        prox = proximal.take(part, logp, mask)
        is_weights, _ = proximal.weights(prox, old, mask)  # the batch's metrics come from update_policy
        old = prox
    adv = torch.tensor([s.advantage for s in part])
    loss, metrics = ppo_clip_loss(
        logp,
        old,
        adv,
        mask,
        algo.clip_low,
        algo.clip_high,
        algo.aggregation,
        algo.log_ratio_clamp,
        token_weights=is_weights,
    )
    aggregate = AGGREGATIONS.get(algo.aggregation)
    ent = aggregate(entropy, mask)
    if algo.entropy_coef:
        loss = loss - algo.entropy_coef * ent
    if kl_coef > 0 and state.reference is None:
        raise ValueError(
            f"policy {state.policy.name}: a KL coefficient is set (kl_coef or kl_coef_by_role) "
            "but the optimizer has no reference model; create it with a reference"
        )
    if state.reference is not None:
        with torch.no_grad(), bf16_body(state.reference, bf16):  # the same precision as the policy's
            ref_logp, _, _ = shared_prefix_logprobs(
                state.reference, prompts, responses, index, pad_id, row_temperature, response_buckets=buckets
            )
        kl = aggregate(kl_k3(logp, ref_logp, algo.kl_clamp), mask)
        loss = loss + kl_coef * kl
        metrics["kl_ref"] = float(kl.detach())
    if not torch.isfinite(loss):
        raise FloatingPointError(
            f"policy {state.policy.name}: loss is {loss.item()}; lower the learning rate or check rewards"
        )
    metrics.update(entropy=float(ent.detach()), tokens=float(mask.sum()))
    return loss * weight, metrics
