"""PEFT LoRA layers on the lean decode path, with a different adapter for different rows of one batch.

Why: the lean decoder (`lean_decode.py`) calls each projection's weights directly, so a PEFT LoRA
layer used to send the whole call back to the HF forward (measured: the same tokens took 37% longer
to sample at 135M with a LoRA adapter on). Here a LoRA projection is computed from its parts:

    out = x @ W.T + b  +  scaling[a] * (x @ A[a].T) @ B[a].T      (vanilla LoRA, PEFT's own formula)

and because the base product `x @ W.T` does not depend on the adapter, rows of several adapters on
one base share it: one base matmul over every row, then each adapter's small rank-r delta on its own
contiguous block of rows. N LoRA roles then cost about one forward instead of N.

Rows: the decoder's rows are laid out adapter block by adapter block (`RowAdapters`); finished rows
leave in ascending order, so each block stays contiguous and only its end moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from teamrl.policies.cpu_linear import is_torch_linear, packed_linear


@dataclass(frozen=True)
class RowAdapters:
    """Which adapter each row of a decode batch runs: block i is rows ends[i-1] .. ends[i]-1.

    names[i] None: those rows run the base alone (no adapter).
    """

    names: tuple[str | None, ...]
    ends: tuple[int, ...]

    @classmethod
    def one(cls, name: str | None, rows: int) -> RowAdapters:
        return cls((name,), (rows,))

    @classmethod
    def blocks(cls, names: Sequence[str | None], sizes: Sequence[int]) -> RowAdapters:
        """Consecutive blocks of `sizes[i]` rows running adapter `names[i]`."""
        ends, total = [], 0
        for size in sizes:
            total += size
            ends.append(total)
        return cls(tuple(names), tuple(ends))

    def spans(self) -> list[tuple[str | None, int, int]]:
        """(adapter, start, end) of every non-empty block."""
        out, start = [], 0
        for name, end in zip(self.names, self.ends):
            if end > start:
                out.append((name, start, end))
            start = end
        return out

    def keep(self, rows: torch.Tensor) -> RowAdapters:
        """The blocks after only batch rows `rows` (ascending) are kept."""
        bounds = torch.tensor(self.ends, dtype=rows.dtype, device=rows.device)
        kept = torch.searchsorted(rows, bounds).tolist()  # rows kept before each old end
        return RowAdapters(self.names, tuple(int(k) for k in kept))


def _is_lora_linear(module: nn.Module) -> bool:
    return hasattr(module, "lora_A") and hasattr(module, "base_layer") and isinstance(module.lora_A, nn.ModuleDict)


def lora_unsupported(module: Any, adapters: Sequence[str | None]) -> str | None:
    """Why `project` cannot reproduce `module` for `adapters`; None when it can (a plain Linear always can).

    module: an `nn.Module`, typed Any because a PEFT layer's attributes (`lora_A`, `base_layer`, ...) are
    read dynamically."""
    if is_torch_linear(module):
        return None
    if not _is_lora_linear(module):
        return f"projection {type(module).__name__} is neither a torch Linear nor a PEFT LoRA Linear"
    if not is_torch_linear(module.base_layer):
        return f"LoRA over {type(module.base_layer).__name__} (quantised or nested), not a torch Linear"
    if getattr(module, "merged", False) or getattr(module, "merged_adapters", None):
        return "an adapter is merged into the base weights"
    if getattr(module, "disable_adapters", False):
        return "adapters are disabled"
    if module.base_layer._forward_hooks or module.base_layer._forward_pre_hooks:
        return "forward hooks on a LoRA base layer"
    for name in adapters:
        if name is None or name not in module.lora_A:
            continue
        if name in getattr(module, "lora_variant", {}):  # DoRA and other variants compute more than B A x
            return f"adapter {name!r} is a LoRA variant ({type(module.lora_variant[name]).__name__})"
        if module.lora_B[name].bias is not None or module.lora_A[name].bias is not None:
            return f"adapter {name!r} has a LoRA bias"
        dropout = module.lora_dropout[name]
        if not isinstance(dropout, nn.Identity) and dropout.training and dropout.p > 0:
            return f"adapter {name!r} has dropout on (call model.eval())"
    return None


def project(x: torch.Tensor, module: Any, rows: RowAdapters) -> torch.Tensor:
    """`module`'s output for x [R, in]: the base projection of every row plus each block's own LoRA delta
    (decoding: no gradients; the base reads oneDNN's packed weight where it applies, `packed_linear`)."""
    if is_torch_linear(module):
        return packed_linear(x, module)
    base = module.base_layer
    out = packed_linear(x, base)
    for name, start, end in rows.spans():
        if name is None or name not in module.lora_A:
            continue
        a, b = module.lora_A[name].weight, module.lora_B[name].weight  # [r, in], [out, r]
        if torch.is_autocast_enabled(x.device.type):  # the bf16 sampler: see _lora_delta
            with torch.autocast(x.device.type, enabled=False):
                delta = _lora_delta(x[start:end], a, b)
        else:
            delta = _lora_delta(x[start:end], a, b)
        out[start:end] += (delta * module.scaling[name]).to(out.dtype)
    return out


def _lora_delta(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(x @ A^T) @ B^T in the adapter's dtype. Inside the bf16 sampler's autocast this runs with autocast off: the
    factors are rank-r matmuls that bf16 does not speed up, and autocast would cast both factors at every
    projection of every decode step (measured at 24 rows: 113 us a projection under autocast, 30 us in fp32)."""
    return (x.to(a.dtype) @ a.t()) @ b.t()
