"""Supervised fine-tuning on (prompt, response) pairs, loss on the response tokens only."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch

from teamrl.policies.loading import Policy
from teamrl.policies.scoring import pack_responses, response_logprobs


def supervised_finetune(
    policy: Policy,
    batches: Iterator[list[tuple[str, str]]],
    steps: int,
    lr: float = 1e-3,
    seed: int = 0,
    log: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Minimise, over `steps` batches of (prompt, response), the response NLL (EOS included) with AdamW and a cosine schedule; returns losses."""
    torch.manual_seed(seed)
    model, tok = policy.model, policy.tokenizer
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * s / max(steps, 1))))
    model.train()
    losses = []
    for step in range(steps):
        batch = next(batches)
        prompts = [policy.encode_prompt(p) for p, _ in batch]
        responses = [tok(r, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for _, r in batch]
        packed = pack_responses(prompts, responses, tok.pad_token_id)
        logp, _ = response_logprobs(model, packed)
        loss = -(logp * packed.response_mask).sum() / packed.response_mask.sum()
        if not torch.isfinite(loss):
            raise FloatingPointError(f"SFT loss became {loss.item()} at step {step}; lower the lr")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if log is not None:
            log(step, losses[-1])
    model.eval()
    return losses
