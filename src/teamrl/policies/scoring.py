"""Log-probs and entropies of given responses under a model: the trainer's forward pass."""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel

from teamrl.policies import prompt_prefix
from teamrl.policies.prompt_prefix import columns_are_positions_free, forward_prefix_once, shared_prefix
from teamrl.policies.token_logprobs import token_logprobs


@dataclass
class ResponseBatch:
    """Prompt+response sequences, left-padded so that every response ends at the right edge."""

    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L]
    position_ids: torch.Tensor  # [B, L]
    response_mask: torch.Tensor  # [B, T] 1 on real response tokens
    response_ids: torch.Tensor  # [B, T] right-padded response tokens


def pack_responses(prompts: list[list[int]], responses: list[list[int]], pad_id: int) -> ResponseBatch:
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
        ids[i, p_width - len(p) : p_width] = torch.tensor(p)
        mask[i, p_width - len(p) : p_width + len(r)] = 1
        if r:
            ids[i, p_width : p_width + len(r)] = torch.tensor(r)
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
    logits = out.logits[:, -t_width - 1 : -1, :].float()
    if temperature > 0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, batch.response_ids.to(device)[..., None]).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def left_pad(prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids [B, L] and attention mask [B, L], padded on the left so prompts end together."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p) :] = 1
    return ids, mask


@functools.cache
def _forward_parameters(model_class: type[Any]) -> frozenset[str]:
    """The keyword names a model class's `forward` takes (read once per class: the decode loop asks every step)."""
    return frozenset(inspect.signature(model_class.forward).parameters)


def _inner_forward_parameters(model) -> frozenset[str]:
    # A PEFT wrapper forwards keyword arguments to the model it wraps: ask that model.
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    # a class is hashable, but mypy checks type[X] against Hashable through X's instance-level __hash__
    return _forward_parameters(type(inner))  # type: ignore[arg-type]


def cache_keyword(model) -> str:
    """The keyword `model.forward` takes its KV cache by: `cache`, or `past_key_values` before 5.x."""
    # transformers renamed `past_key_values` to `cache`; pass whichever this version takes.
    return "cache" if "cache" in _inner_forward_parameters(model) else "past_key_values"


def cached_forward_full(model, cache: DynamicCache, **inputs) -> torch.Tensor:
    """Forward with a KV cache that the model extends in place; returns all logits [B, L, V]."""
    return model(**inputs, use_cache=True, **{cache_keyword(model): cache}).logits


def keeps_last_logits(model) -> bool:
    """Whether `model.forward` can compute the logits of the last position only (`logits_to_keep`)."""
    return "logits_to_keep" in _inner_forward_parameters(model)


def cached_forward(model, cache: DynamicCache, **inputs) -> torch.Tensor:
    """Last-position logits [B, V] of a cached forward.

    Only the last position goes through the output layer where the model allows it: a prefill of P prompt
    positions would otherwise project every one onto the vocabulary and keep [B, P, V] logits. With
    Gemma-3's 262k-entry vocabulary and few-shot prompts of ~150 tokens that was 15 GB for 96 rows, and
    most of the prefill's arithmetic."""
    keep = {"logits_to_keep": 1} if keeps_last_logits(model) else {}
    return cached_forward_full(model, cache, **inputs, **keep)[:, -1, :].float()


def prompt_forward(
    model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, room: int | None = None
) -> tuple[torch.Tensor, DynamicCache, torch.Tensor]:
    """Forward of left-padded prompts ids/mask/positions [G, P]: the next-token logits after each prompt
    [G, V], the KV cache, and which of its W columns hold a token [G, W] (the mask a continuation attends
    with). Prompts sharing `prompt_prefix.MIN_SHARED_PREFIX` leading tokens or more run that prefix once
    (`prompt_prefix.forward_prefix_once`) where the model attends to every column: full attention, or a
    sliding window that spans the prompts and the `room` columns a continuation adds (None: unknown, so
    full attention only). The cache's columns are then [prefix | padding | own tokens]."""

    def run(input_ids, attention_mask, position_ids, cache):
        # Only the last prompt position's logits are read: logits_to_keep=1 skips the [G, P, V] head.
        return cached_forward_full(
            model,
            cache,
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            logits_to_keep=1,
        )[:, -1, :]

    spans = None if room is None else ids.shape[1] + room
    common = shared_prefix(ids, mask) if columns_are_positions_free(model, spans) else 0
    if common < prompt_prefix.MIN_SHARED_PREFIX:
        cache = DynamicCache()
        return run(ids, mask, positions, cache), cache, mask
    return forward_prefix_once(run, ids, mask, common)


def shared_prefix_logprobs(
    model: PreTrainedModel,
    prompts: list[list[int]],
    responses: list[list[int]],
    prompt_index: list[int],
    pad_id: int,
    temperature: float | torch.Tensor = 1.0,
    with_entropy: bool = False,
    response_buckets: list[list[int]] | None = None,
    entropy_grad: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Like `response_logprobs`, but each distinct prompt is encoded once for all its responses.

    The K candidates of an AT-GRPO group share their prompt, and prompts are most of the tokens:
    the prompt forward runs on [G, P], its KV cache is gathered to the N responses (the gather is
    differentiable, so gradients still reach the prompt positions), and only [N, T] is recomputed.
    prompts: G distinct prompts; responses: N; prompt_index: [N] prompt of each response.
    temperature: one for all, or [N] one per response (agents may sample at different temperatures).
    response_buckets: responses (indices) that share a response forward, each padded only to its
    own bucket's longest response (e.g. `length_buckets` of the response lengths); None: one forward.
    Returns log-probs [N, T], the response mask [N, T], and entropies [N, T] when asked (T: the
    longest response; columns past a response's end hold zeros).
    entropy_grad: False computes the entropies outside autograd (for logging only: no graph is kept over
    the [N, T, vocabulary] tensors they are made of).
    """
    device = next(model.parameters()).device
    ids, mask = left_pad(prompts, pad_id)
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    t_width = max(max(len(r) for r in responses), 1)
    # mask: the cache's columns
    prompt_logits, cache, mask = prompt_forward(model, ids, mask, positions, room=t_width)
    buckets = response_buckets if response_buckets is not None else [list(range(len(responses)))]
    if sorted(i for b in buckets for i in b) != list(range(len(responses))):
        raise ValueError(f"response_buckets must hold every response index 0..{len(responses) - 1} once")
    temps = temperature.to(device) if isinstance(temperature, torch.Tensor) else None
    pieces, order = [], []
    entropy: torch.Tensor | None  # a bucket's in the loop; every row's (None without with_entropy) after it
    for rows in buckets:
        if not rows:
            continue
        # The one-bucket case selects in place; several buckets each read their own copy of the rows.
        sub = cache if len(buckets) == 1 else _cache_rows_copy(cache)
        index = torch.tensor([prompt_index[i] for i in rows], device=device)
        sub.batch_select_indices(index)
        width = max(max(len(responses[i]) for i in rows), 1)
        resp = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)
        for row, i in enumerate(rows):
            resp[row, : len(responses[i])] = torch.tensor(responses[i])
        # Padding sits after each response, so the causal mask already keeps real tokens from it.
        full_mask = torch.cat([mask[index], torch.ones_like(resp)], dim=1)
        resp_pos = positions[index, -1:] + 1 + torch.arange(width, device=device)[None, :]
        logits = cached_forward_full(model, sub, input_ids=resp, attention_mask=full_mask, position_ids=resp_pos)
        # token j is predicted by the logits before it: the prompt's last position for j = 0
        logits = torch.cat([prompt_logits[index][:, None, :], logits[:, :-1, :]], dim=1).float()
        if temps is not None:
            logits = logits / temps[rows].to(logits.dtype)[:, None, None]
        elif temperature > 0 and temperature != 1:  # x / 1 is x: no pass (and no backward) over [N, T, V]
            logits = logits / temperature
        logp, entropy = token_logprobs(logits, resp, with_entropy, entropy_grad)
        pad = (0, t_width - width)
        pieces.append((torch.nn.functional.pad(logp, pad), torch.nn.functional.pad(entropy, pad)))
        order.extend(rows)
    inverse = torch.empty(len(order), dtype=torch.long, device=device)
    inverse[torch.tensor(order, device=device)] = torch.arange(len(order), device=device)
    logp = torch.cat([p[0] for p in pieces])[inverse]
    entropy = torch.cat([p[1] for p in pieces])[inverse] if with_entropy else None
    resp_mask = torch.zeros((len(responses), t_width), device=device)
    for i, r in enumerate(responses):
        resp_mask[i, : len(r)] = 1.0
    return logp, resp_mask, entropy


def _cache_rows_copy(cache: DynamicCache) -> DynamicCache:
    """A cache whose `batch_select_indices` leaves `cache` intact (its layers re-bind, never write, tensors)."""
    sub = copy.copy(cache)
    sub.layers = [copy.copy(layer) for layer in cache.layers]
    return sub


@contextmanager
def bf16_body(model: torch.nn.Module, enabled: bool = True) -> Iterator[None]:
    """bf16 autocast over the model's body, with its output head (and so every logit) in fp32.

    The head's input is upcast and its matmul runs with autocast off, so log-softmax sees fp32
    logits; what stays bf16 is the body's matmul inputs (rounded to 8 mantissa bits, accumulated in
    fp32). The weights stay fp32 (master weights); only the matmuls' operands are cast.
    """
    if not enabled:
        yield
        return
    device_type = next(model.parameters()).device.type
    # a PEFT wrapper's `get_base_model` and an HF model's output head are attributes torch's typing cannot see
    inner: Any = model
    inner = inner.get_base_model() if hasattr(inner, "get_base_model") else inner
    head = inner.get_output_embeddings()
    if head is None:
        raise ValueError(f"{type(inner).__name__} has no output embeddings: bf16 autocast needs a causal LM head")
    patched = "forward" in head.__dict__
    original = head.forward

    def fp32_head(hidden: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type, enabled=False):
            return original(hidden.float())

    head.forward = fp32_head
    try:
        with torch.autocast(device_type, dtype=torch.bfloat16):
            yield
    finally:
        if patched:
            head.forward = original
        else:
            del head.forward
