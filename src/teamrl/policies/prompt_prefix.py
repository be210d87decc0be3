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

import torch
from torch import nn

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


def columns_are_positions_free(model: nn.Module) -> bool:
    """Whether every attention layer of `model` sees all earlier keys (full attention), so padding
    between a prefix and a prompt's own tokens changes nothing. A sliding window counts cache columns,
    not positions: padding inside it would hide keys the whole prompt lets a query see."""
    config = getattr(model, "config", None)
    if config is None:  # nothing says how it attends: keep the whole prompts
        return False
    if any(kind != "full_attention" for kind in getattr(config, "layer_types", None) or ()):
        return False
    return getattr(config, "sliding_window", None) is None or getattr(config, "use_sliding_window", True) is False


def own_columns(mask: torch.Tensor, common: int) -> tuple[int, torch.Tensor, torch.Tensor]:
    """For left-padded prompts (mask [b, P]) after a shared prefix of `common` tokens: how many columns
    their own tokens take (the longest's), those columns' positions [b, own] (each prompt's own tokens
    right-aligned, numbered on from `common`), and the mask of the whole layout [b, common + own]:
    [prefix | padding | own tokens]."""
    lengths = mask.sum(-1)
    own = int(lengths.max()) - common
    own_mask = (torch.arange(own, device=mask.device)[None, :] >= own - (lengths - common)[:, None]).to(mask.dtype)
    positions = common + (own_mask.cumsum(-1) - 1).clamp(min=0)
    return own, positions, torch.cat([mask.new_ones((mask.shape[0], common)), own_mask], dim=1)


def repeat_prefix(prefix_cache, cache, rows: int) -> None:
    """Fill the empty `cache` with the one-row `prefix_cache`'s keys and values, repeated for `rows`
    prompts (views, no copy: the next forward's concatenation writes the rows out)."""
    for index, layer in enumerate(prefix_cache.layers):
        cache.update(layer.keys.expand(rows, -1, -1, -1), layer.values.expand(rows, -1, -1, -1), index)
