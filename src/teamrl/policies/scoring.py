"""Log-probs and entropies of given responses under a model: the trainer's forward pass."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel


@dataclass
class ResponseBatch:
    """Prompt+response sequences, left-padded so that every response ends at the right edge."""

    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L]
    position_ids: torch.Tensor  # [B, L]
    response_mask: torch.Tensor  # [B, T] 1 on real response tokens
    response_ids: torch.Tensor  # [B, T] right-padded response tokens


def pack_responses(
    prompts: list[list[int]], responses: list[list[int]], pad_id: int
) -> ResponseBatch:
    """Lay out each prompt+response as [pad.. prompt response pad..] with responses aligned at column P."""
    if len(prompts) != len(responses) or not prompts:
        raise ValueError("need one response per prompt and at least one pair")
    p_width = max(len(p) for p in prompts)
    t_width = max(max(len(r) for r in responses), 1)
    batch = len(prompts)
    ids = torch.full((batch, p_width + t_width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    resp = torch.full((batch, t_width), pad_id, dtype=torch.long)
    resp_mask = torch.zeros((batch, t_width), dtype=torch.float32)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        ids[i, p_width - len(p): p_width] = torch.tensor(p)
        mask[i, p_width - len(p): p_width + len(r)] = 1
        if r:
            ids[i, p_width: p_width + len(r)] = torch.tensor(r)
            resp[i, : len(r)] = torch.tensor(r)
            resp_mask[i, : len(r)] = 1.0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return ResponseBatch(ids, mask, positions, resp_mask, resp)


def response_logprobs(
    model: PreTrainedModel, batch: ResponseBatch, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob [B, T] of each response token under softmax(logits / temperature), and entropy [B, T].

    Differentiable; masked positions hold garbage and must be masked by the caller.
    """
    device = next(model.parameters()).device
    t_width = batch.response_ids.shape[1]
    out = model(
        input_ids=batch.input_ids.to(device),
        attention_mask=batch.attention_mask.to(device),
        position_ids=batch.position_ids.to(device),
        use_cache=False,
    )
    # logits at position j predict token j+1: the response tokens are predicted by the T columns
    # ending one before the last.
    logits = out.logits[:, -t_width - 1: -1, :].float()
    if temperature > 0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, batch.response_ids.to(device)[..., None]).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy
