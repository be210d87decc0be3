"""One policy's update from its samples: PPO-clipped policy gradient in minibatches."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from teamrl.algorithms.losses import AGGREGATIONS, kl_k3, ppo_clip_loss
from teamrl.config import AlgorithmConfig, PolicyConfig, TrainConfig
from teamrl.policies.loading import Policy
from teamrl.policies.scoring import shared_prefix_logprobs
from teamrl.rollout.tree import Sample


@dataclass
class PolicyOptimizer:
    """A policy's optimizer, schedule and (optional) frozen reference."""

    policy: Policy
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    reference: torch.nn.Module | None


def make_optimizer(policy: Policy, pcfg: PolicyConfig, tcfg: TrainConfig, kl_coef: float) -> PolicyOptimizer:
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=pcfg.lr, weight_decay=pcfg.weight_decay)

    def lr_factor(step: int) -> float:
        if step < tcfg.warmup_steps:
            return (step + 1) / tcfg.warmup_steps
        if tcfg.schedule == "cosine":
            progress = (step - tcfg.warmup_steps) / max(1, tcfg.steps - tcfg.warmup_steps)
            return 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
        return 1.0

    reference = None
    if kl_coef > 0:
        import copy
        reference = copy.deepcopy(policy.model).eval().requires_grad_(False)
    return PolicyOptimizer(policy, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor), reference)


def update_policy(
    state: PolicyOptimizer,
    samples: list[Sample],
    algo: AlgorithmConfig,
    temperature: float,
    grad_clip: float,
    rng: random.Random,
) -> dict[str, float]:
    """Run `ppo_epochs` passes of minibatch updates over `samples`; returns averaged metrics."""
    model, tok = state.policy.model, state.policy.tokenizer
    model.train()
    totals: dict[str, float] = {}
    steps = 0
    for _ in range(algo.ppo_epochs):
        for chunk in _minibatches(samples, algo.minibatch_size, rng):
            metrics = _minibatch_step(state, chunk, algo, temperature, grad_clip, tok.pad_token_id)
            for key, value in metrics.items():
                totals[key] = totals.get(key, 0.0) + value
            steps += 1
    state.scheduler.step()
    out = {key: value / max(steps, 1) for key, value in totals.items()}
    out["lr"] = state.optimizer.param_groups[0]["lr"]
    out["samples"] = float(len(samples))
    return out


def _minibatches(samples: list[Sample], size: int, rng: random.Random) -> list[list[Sample]]:
    """Shuffled minibatches that keep samples of one prompt together, so the prompt is encoded once."""
    by_prompt: dict[tuple[int, ...], list[Sample]] = {}
    for s in samples:
        by_prompt.setdefault(tuple(s.generation.prompt_ids), []).append(s)
    groups = list(by_prompt.values())
    rng.shuffle(groups)
    batches, current = [], []
    for group in groups:
        if current and len(current) + len(group) > size:
            batches.append(current)
            current = []
        current.extend(group)
    if current:
        batches.append(current)
    return batches


def _minibatch_step(state: PolicyOptimizer, chunk: list[Sample], algo: AlgorithmConfig,
                    temperature: float, grad_clip: float, pad_id: int) -> dict[str, float]:
    gens = [s.generation for s in chunk]
    prompt_slot: dict[tuple[int, ...], int] = {}
    index = [prompt_slot.setdefault(tuple(g.prompt_ids), len(prompt_slot)) for g in gens]
    prompts = [list(p) for p in prompt_slot]
    responses = [g.response_ids for g in gens]
    logp, mask, entropy = shared_prefix_logprobs(state.policy.model, prompts, responses, index, pad_id,
                                                 temperature, with_entropy=True)
    old = torch.zeros_like(mask)
    for i, g in enumerate(gens):
        old[i, : len(g.logprobs)] = torch.tensor(g.logprobs)
    adv = torch.tensor([s.advantage for s in chunk])
    loss, metrics = ppo_clip_loss(logp, old, adv, mask, algo.clip_low, algo.clip_high, algo.aggregation)
    aggregate = AGGREGATIONS.get(algo.aggregation)
    ent = aggregate(entropy, mask)
    if algo.entropy_coef:
        loss = loss - algo.entropy_coef * ent
    if state.reference is not None:
        with torch.no_grad():
            ref_logp, _, _ = shared_prefix_logprobs(state.reference, prompts, responses, index, pad_id,
                                                    temperature)
        kl = aggregate(kl_k3(logp, ref_logp), mask)
        loss = loss + algo.kl_coef * kl
        metrics["kl_ref"] = float(kl)
    if not torch.isfinite(loss):
        raise FloatingPointError(
            f"policy {state.policy.name}: loss is {loss.item()}; lower the learning rate or check rewards")
    state.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    params = [p for p in state.policy.model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else float("inf"))
    state.optimizer.step()
    metrics.update(loss=float(loss), entropy=float(ent), grad_norm=float(norm),
                   response_tokens=float(mask.sum()))
    return metrics
