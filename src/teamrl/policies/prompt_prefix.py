"""Prompts that begin alike: how many leading tokens a batch of left-padded prompts shares, and whether
a model may compute such a prefix once for all of them.

Chat prompts of one role repeat a system prompt and worked examples; on the real studies' calc_flows
prompts 80% of the prompt tokens are such a prefix. Sampling (`teamrl.rollout.lean_decode.prefill`)
and the trainer's scoring (`teamrl.policies.scoring.prompt_forward`) run that prefix once as one
sequence, repeat its keys and values for every prompt, and run each prompt's own tokens after it. A
prompt's columns are then [prefix | padding | its own tokens]: the padding sits between the prefix
and the prompt's own tokens instead of on the left. Full attention does not depend on the order of
keys (their positions are in the rotary already), so the arithmetic is the whole prompts'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch
from torch import nn
from transformers import DynamicCache

T = TypeVar("T")

MIN_SHARED_PREFIX = 16
"""Prompts that begin with at least this many equal tokens compute that prefix once."""


def shared_prefix(ids: torch.Tensor, mask: torch.Tensor) -> int:
    """How many leading tokens every left-padded prompt of ids/mask [b, P] shares, at most the shortest
    prompt's length less one (each prompt keeps a token of its own: its last one gives its logits).
    0 for one prompt, or for a mask that is not left padding (zeros, then ones)."""
    rows, width = ids.shape
    lengths = mask.sum(-1)
    if rows < 2 or not bool((mask == (torch.arange(width, device=mask.device) >= width - lengths[:, None])).all()):
        return 0
    span = int(lengths.min()) - 1
    if span < 1:
        return 0
    starts = width - lengths
    leading = ids.gather(1, starts[:, None] + torch.arange(span, device=ids.device)[None, :])  # [b, span]
    same = (leading == leading[:1]).all(0)
    return int(same.long().cumprod(0).sum())


def columns_are_positions_free(model: nn.Module, columns: int | None = None) -> bool:
    """Whether padding between a prefix and a prompt's own tokens changes nothing for `model` over a
    sequence of `columns` cache columns (None: of any length). Full attention sees all earlier keys
    whatever their columns. A sliding window counts cache columns, not positions: padding inside it
    would hide keys the whole prompt lets a query see, unless the window spans every column there is
    (Gemma-3's 512-column window over a few-shot prompt of ~250 tokens and its answer)."""
    config = getattr(model, "config", None)
    if config is None:  # nothing says how it attends: keep the whole prompts
        return False
    window = getattr(config, "sliding_window", None)
    # A query sees the keys fewer than `window` columns back (HF's sliding mask), so columns <= window hide none.
    window_spans_all = window is not None and columns is not None and columns <= window
    if any(kind != "full_attention" for kind in getattr(config, "layer_types", None) or ()):
        return window_spans_all
    return window is None or getattr(config, "use_sliding_window", True) is False or window_spans_all


def forward_prefix_once(
    run: Callable[..., T], ids: torch.Tensor, mask: torch.Tensor, common: int, cache: DynamicCache | None = None
) -> tuple[T, DynamicCache, torch.Tensor]:
    """Left-padded prompts ids/mask [b, P] whose first `common` tokens are equal, through a forward
    `run(input_ids, attention_mask, position_ids, cache)` that extends `cache`: the prefix runs once (row
    0's), its keys and values are repeated for every prompt (views, no copy: the next forward's
    concatenation writes the rows out; gradients reach the prefix from every prompt), then each
    prompt's own tokens run after it, right-aligned and numbered on from `common`. Returns that second
    run's output, the cache, and the mask of its columns [b, common + own]: [prefix | padding | own].
    cache: an empty cache to fill (a decoder's reserved one); None: a new `DynamicCache`."""
    rows, width = ids.shape
    lengths = mask.sum(-1)
    head = torch.arange(common, device=ids.device)[None, :]
    start = width - int(lengths[0])
    once = DynamicCache()
    run(ids[:1, start : start + common], torch.ones_like(head), head, once)
    cache = DynamicCache() if cache is None else cache
    for index, layer in enumerate(once.layers):
        cache.update(layer.keys.expand(rows, -1, -1, -1), layer.values.expand(rows, -1, -1, -1), index)
    own = int(lengths.max()) - common
    own_mask = (torch.arange(own, device=mask.device)[None, :] >= own - (lengths - common)[:, None]).to(mask.dtype)
    positions = common + (own_mask.cumsum(-1) - 1).clamp(min=0)
    full_mask = torch.cat([mask.new_ones((rows, common)), own_mask], dim=1)
    return run(ids[:, width - own :], full_mask, positions, cache), cache, full_mask
