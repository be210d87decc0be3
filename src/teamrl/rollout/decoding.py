"""The decode loop's model side: prefill prompts, then one token per row per step, rows may leave.

Two implementations of one small protocol:
- `LeanDecoder` (`lean_decode.py`): the arithmetic of a Llama-family step on the model's own
  parameters, a static KV buffer, the prompt's keys shared by its K samples;
- `HFDecoder`: the HF forward with the reserved KV cache (`kv_cache.py`), for every other model
  (other architectures, LoRA variants such as DoRA, hooks, sliding windows).
`open_decoder` picks the lean one whenever `lean_unsupported` finds nothing against it. A PEFT model
is decoded on its base with its LoRA deltas applied per row (`lora_rows.py`), which also lets rows of
several adapters share one call (`shares_one_call`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import nn

from teamrl.policies import prompt_prefix
from teamrl.policies.lora import activate
from teamrl.policies.prompt_prefix import columns_are_positions_free, forward_prefix_once, shared_prefix
from teamrl.policies.scoring import cached_forward
from teamrl.rollout.kv_cache import reserved_cache
from teamrl.rollout.lean_decode import LeanDecoder, lean_unsupported
from teamrl.rollout.lora_rows import RowAdapters

LEAN_DECODE = True
"""Use `LeanDecoder` where it applies (False: always the HF forward; for comparisons and debugging)."""


class Decoder(Protocol):
    """Decode state of a batch of rows: prompt i's K samples are rows i*K .. i*K+K-1 at the start."""

    prefill_logits: torch.Tensor  # [B, V] fp32, next-token logits of each prompt

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row [R]; return the next-token logits [R, V] (fp32)."""

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only batch rows `rows` (ascending indices into the current batch)."""


class HFDecoder:
    """Decode through the model's HF forward with the reserved KV cache (any causal LM)."""

    def __init__(
        self,
        model: nn.Module,
        ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        repeats: int,
        reserve: int,
    ) -> None:
        self.model = model
        width = mask.shape[1]
        common = shared_prefix(ids, mask) if columns_are_positions_free(model, width + reserve) else 0
        if common >= prompt_prefix.MIN_SHARED_PREFIX:
            # The prompts' shared prefix runs once (prompt_prefix.forward_prefix_once); the cache's columns are
            # then [prefix | padding | own tokens], and the decode steps attend with that layout's mask.
            self.cache = reserved_cache(reserve + width - common)
            self.prefill_logits, self.cache, mask = forward_prefix_once(
                functools.partial(self._forward, model), ids, mask, common, self.cache
            )
        else:
            self.cache = reserved_cache(reserve)  # decode steps write in place (kv_cache.py)
            self.prefill_logits = self._forward(model, ids, mask, positions, self.cache)
        if repeats > 1:  # the shared prefix is encoded once; its cache is copied for the K samples
            self.cache.batch_repeat_interleave(repeats)
        rows = ids.shape[0] * repeats
        self.prompt_width = mask.shape[1]
        # The mask of every step is a prefix of one preallocated [R, P + T] buffer: no per-step copy.
        self.mask = torch.cat(
            [mask.repeat_interleave(repeats, dim=0), torch.ones((rows, reserve), dtype=mask.dtype, device=mask.device)],
            dim=1,
        )
        self.next_pos = positions[:, -1].repeat_interleave(repeats) + 1  # [R]
        self.filled = 0

    @staticmethod
    def _forward(
        model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache
    ) -> torch.Tensor:
        return cached_forward(model, cache, input_ids=ids, attention_mask=mask, position_ids=positions)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.filled += 1
        logits = cached_forward(
            self.model,
            self.cache,
            input_ids=tokens[:, None],
            attention_mask=self.mask[:, : self.prompt_width + self.filled],
            position_ids=self.next_pos[:, None],
        )
        self.next_pos = self.next_pos + 1
        return logits

    def keep(self, rows: torch.Tensor) -> None:
        self.cache.batch_select_indices(rows)
        self.mask, self.next_pos = self.mask[rows], self.next_pos[rows]


def _peft_parts(model: nn.Module) -> tuple[nn.Module, str | None]:
    """(the network to decode, its active LoRA adapter): a PEFT model's base and adapter (None when several
    adapters are active at once, whose deltas PEFT sums), else (model, None)."""
    if hasattr(model, "peft_config") and hasattr(model, "get_base_model"):
        peft_model: Any = model  # a PeftModel: its adapters and base are attributes torch's typing cannot see
        active = list(getattr(model, "active_adapters", None) or [peft_model.active_adapter])
        return peft_model.get_base_model(), active[0] if len(active) == 1 and isinstance(active[0], str) else None
    return model, None


def shares_one_call(model: nn.Module, max_length: int, adapters: Sequence[str]) -> bool:
    """Whether rows of these LoRA `adapters` of PEFT `model` can be decoded in one call (the lean path)."""
    base, _ = _peft_parts(model)
    return LEAN_DECODE and base is not model and lean_unsupported(base, max_length, adapters) is None


def open_decoder(
    model: nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    repeats: int,
    reserve: int,
    lean: bool | None = None,
    adapter_blocks: tuple[Sequence[str], Sequence[int]] | None = None,
) -> Decoder:
    """Prefill left-padded prompts ids/mask [B, P] for `repeats` samples each, room for `reserve` steps.

    lean: None follows `LEAN_DECODE`; the lean decoder is used only where `lean_unsupported` allows.
    adapter_blocks: (adapter names, prompt counts) of a PEFT `model` whose consecutive prompt blocks run
    different adapters (only where `shares_one_call`); None: every prompt runs the active adapter.
    """
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    use_lean = LEAN_DECODE if lean is None else lean
    base, active = _peft_parts(model)
    if adapter_blocks is not None:
        names, sizes = adapter_blocks
        if not (use_lean and shares_one_call(model, mask.shape[1] + reserve, names)):
            raise ValueError("rows of several adapters share a call only on the lean decode path (shares_one_call)")

        def activate_block(name: str | None) -> None:
            assert name is not None  # the blocks are those of `names`, adapters all
            activate(model, name)

        return LeanDecoder(
            base, ids, mask, positions, repeats, reserve, RowAdapters.blocks(names, sizes), activate=activate_block
        )
    several_active = base is not model and active is None  # PEFT with several adapters active at once
    if use_lean and not several_active and lean_unsupported(base, mask.shape[1] + reserve, (active,)) is None:
        return LeanDecoder(base, ids, mask, positions, repeats, reserve, RowAdapters.one(active, ids.shape[0]))
    return HFDecoder(model, ids, mask, positions, repeats, reserve)
