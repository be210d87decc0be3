"""Drawing one token per row from next-token probabilities: the inverse of each row's cumulative distribution."""

from __future__ import annotations

import torch
import torch.nn.functional as F

DRAW_BLOCK = 256
"""Vocabulary entries per block of the draw (bounds the float32 rounding of the sums inside a block)."""


def draw_tokens(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of probs [R, V] (non-negative, each row's sum > 0): the inverse of each row's
    cumulative distribution at one uniform draw, the first index whose cumulative mass exceeds it.

    Why not `torch.multinomial(probs, 1)`: for one sample it draws an exponential random number for
    every vocabulary entry (`benchmarks/experiments/token_draw.py`). Why blocks: a float32 running sum over the whole
    vocabulary reaches ~1 at the likely tokens, after which a rare token's mass (1e-8) is below the sum's
    rounding step and its interval collapses to nothing, or doubles. Here the vocabulary is cut in blocks
    of `DRAW_BLOCK` entries: each block's mass is summed in float32 (exact to ~3e-8 of the block's mass),
    the blocks' masses are accumulated in float64, the draw picks a block, and only that block's running
    sum is formed to pick the token inside it (one pass over the row, not a running sum over all of it).
    A zero-mass token has an empty interval and is never drawn. Rows need not be normalised.
    """
    rows, vocab = probs.shape
    pad = (-vocab) % DRAW_BLOCK
    blocks = (F.pad(probs, (0, pad)) if pad else probs).reshape(rows, -1, DRAW_BLOCK)  # [R, nb, B]
    ends = blocks.sum(-1).double().cumsum(-1)  # [R, nb] mass up to each block's end
    total = ends[:, -1:].contiguous()
    u = torch.rand((rows, 1), generator=generator, dtype=torch.float64, device=probs.device) * total
    # the block: the first whose end exceeds u (or, should u round up to the total, the last with mass)
    block = torch.minimum(torch.searchsorted(ends, u, right=True), torch.searchsorted(ends, total, right=False))
    before = torch.where(block > 0, ends.gather(1, (block - 1).clamp(min=0)), torch.zeros_like(u))
    inside = blocks.gather(1, block[:, :, None].expand(rows, 1, DRAW_BLOCK)).squeeze(1).cumsum(-1)  # [R, B]
    rest = (u - before).to(inside.dtype)
    # the token: the first whose running sum exceeds the rest; should the rest reach the block's own sum
    # (its float32 total and the float64 block end round differently), the block's last token with mass
    index = torch.minimum(
        torch.searchsorted(inside, rest, right=True),
        torch.searchsorted(inside, inside[:, -1:].contiguous(), right=False),
    )
    return (block * DRAW_BLOCK + index).squeeze(-1)


def draw_from_logits(scaled: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row of `softmax(scaled)` [R, V] and its log-prob under that softmax, both [R].

    The same draw as `draw_tokens(softmax(scaled))`, and the log-prob of only the drawn token (the log of its
    probability, taken in float64): the decode loop never forms the full log-softmax (one fused softmax pass
    and one pass of block sums over [R, V], where log-softmax, exp and a running sum took five; torch's
    softmax kernel also computes its exponentials faster than `torch.exp`). A drawn token's probability is
    at least ~1e-30 in practice (a smaller one is drawn once in 1e30 draws), far above float32's smallest
    normal number, so its log is as exact as log-softmax's.
    """
    probs = torch.softmax(scaled, dim=-1)
    tokens = draw_tokens(probs, generator)
    return tokens, probs.gather(-1, tokens[:, None]).squeeze(-1).double().log().to(scaled.dtype)
