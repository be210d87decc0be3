"""Drawing one token per row from next-token probabilities: the inverse of each row's cumulative distribution."""

from __future__ import annotations

import torch

DRAW_BLOCK = 256
"""Vocabulary entries per block of `draw_tokens`' cumulative sums (bounds their float32 rounding)."""


def draw_tokens(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of probs [R, V] (non-negative, each row's sum > 0): the inverse of each row's
    cumulative distribution at one uniform draw, the first index whose cumulative mass exceeds it.

    Why not `torch.multinomial(probs, 1)`: for one sample it draws an exponential random number for
    every vocabulary entry (`benchmarks/token_draw.py`). Why blocks: a float32 running sum over the whole
    vocabulary reaches ~1 at the likely tokens, after which a rare token's mass (1e-8) is below the sum's
    rounding step and its interval collapses to nothing, or doubles. Here the sums run within blocks of
    `DRAW_BLOCK` entries (float32, each interval exact to 3e-8 of its block's mass) and over the blocks'
    totals in float64; the draw picks a block, then the token inside it. A zero-mass token has an empty
    interval and is never drawn.
    """
    rows, vocab = probs.shape
    pad = (-vocab) % DRAW_BLOCK
    blocks = torch.nn.functional.pad(probs, (0, pad)).view(rows, -1, DRAW_BLOCK).cumsum(-1)  # [R, nb, B]
    ends = blocks[..., -1].cumsum(-1, dtype=torch.float64)  # [R, nb] mass up to each block's end
    total = ends[:, -1:].contiguous()
    u = torch.rand((rows, 1), generator=generator, dtype=torch.float64, device=probs.device) * total
    # the block: the first whose end exceeds u (or, should u round up to the total, the last with mass)
    block = torch.minimum(torch.searchsorted(ends, u, right=True), torch.searchsorted(ends, total, right=False))
    before = torch.where(block > 0, ends.gather(1, (block - 1).clamp(min=0)), torch.zeros_like(u))
    inside = blocks.gather(1, block[:, :, None].expand(rows, 1, DRAW_BLOCK)).squeeze(1)  # [R, B]
    rest = (u - before).to(inside.dtype)
    index = torch.minimum(torch.searchsorted(inside, rest, right=True),
                          torch.searchsorted(inside, inside[:, -1:].contiguous(), right=False))
    return (block * DRAW_BLOCK + index).squeeze(-1)
