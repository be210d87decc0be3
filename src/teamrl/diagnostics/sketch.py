"""Gradient vectors for cosines: the exact flattened gradient, or a fixed count sketch of it.

Cosines and EMAs need whole gradient vectors. For a small model the flattened gradient itself is
kept; above `exact_max_params` trainable parameters a count sketch (Charikar et al.) maps it to
`dim` numbers: coordinate i goes to bucket h(i) with sign s(i), so <S x, S y> is an unbiased
estimate of <x, y>. h and s are hashes of the coordinate index, recomputed on the fly in chunks,
so no per-parameter table is stored. The sketch is linear, so the sketch of a difference of
gradients is the difference of their sketches.
"""

from __future__ import annotations

import torch

# Multiplicative hashing constants (Knuth); products stay below 2**63 for indices < 2**32.
_HASH_A, _HASH_B = 2654435761, 2246822519
_CHUNK = 1 << 22  # elements hashed at a time, bounding the temporary memory


class GradientSketch:
    """Maps the current `.grad` of a fixed list of parameters to one 1-D float32 vector."""

    def __init__(self, params: list[torch.nn.Parameter], dim: int, exact_max_params: int, seed: int = 0) -> None:
        if dim < 1:
            raise ValueError(f"sketch dimension must be >= 1, got {dim}")
        self.params = params
        self.numel = sum(p.numel() for p in params)
        self.exact = self.numel <= exact_max_params
        self.dim = self.numel if self.exact else dim
        self.seed = seed

    def __call__(self) -> torch.Tensor:
        """The sketch of the parameters' current gradients (missing grads count as zeros)."""
        device = self.params[0].device if self.params else torch.device("cpu")
        if self.exact:
            return (
                torch.cat(
                    [
                        (p.grad if p.grad is not None else torch.zeros_like(p)).detach().reshape(-1).float()
                        for p in self.params
                    ]
                ).to(device)
                if self.params
                else torch.zeros(0)
            )
        out = torch.zeros(self.dim, device=device)
        offset = 0
        for p in self.params:
            if p.grad is not None:
                flat = p.grad.detach().reshape(-1).float()
                for start in range(0, flat.numel(), _CHUNK):
                    part = flat[start : start + _CHUNK]
                    index = torch.arange(offset + start, offset + start + part.numel(), device=device)
                    bucket, sign = self._hash(index)
                    out.index_add_(0, bucket, part * sign)
            offset += p.numel()
        return out

    def _hash(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mixed = (index * _HASH_A + self.seed) % (1 << 31)
        bucket = mixed % self.dim
        sign = ((index * _HASH_B + self.seed) >> 7) % 2 * 2 - 1
        return bucket, sign.float()


def cosine(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-12) -> float:
    """cos(a, b); 0.0 when either vector is zero (no direction to compare)."""
    na, nb = float(a.norm()), float(b.norm())
    if na < eps or nb < eps:
        return 0.0
    return float(torch.dot(a, b)) / (na * nb)


def mean_pairwise_cosine(vectors: list[torch.Tensor], eps: float = 1e-12) -> float | None:
    """Mean cosine over the pairs of non-zero vectors; None with fewer than two of them.

    A zero gradient (an agent whose samples carried no advantage) has no direction: it is left out
    rather than counted as cosine 0, which would read as "unrelated" in an echo-chamber check.
    """
    live = [v for v in vectors if float(v.norm()) > eps]
    if len(live) < 2:
        return None
    pairs = [cosine(live[i], live[j]) for i in range(len(live)) for j in range(i + 1, len(live))]
    return sum(pairs) / len(pairs)
