"""A KV cache that writes each decode step into a buffer reserved up front.

transformers' `DynamicCache` grows every layer's keys and values by concatenation at each decode
step, which re-copies the whole cache per token (a profile of the engine put about a fifth of a
sampling call in `torch.cat`). Here every layer reserves room for the response length once, at
prefill, and each step writes its new keys and values into that buffer; the attention reads a view
of the filled part. Repeating rows (K samples of a prompt) and dropping finished rows work as with
`DynamicCache`, on the buffers.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer


class ReservedLayer(DynamicLayer):
    """A `DynamicLayer` whose keys/values live in buffers with room for `reserve` more positions."""

    reserve = 0

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self._keys = self._empty(key_states, key_states.shape[-2] + self.reserve)
            self._values = self._empty(value_states, value_states.shape[-2] + self.reserve)
            self._length = 0
        start, count = self._length, key_states.shape[-2]
        if start + count > self._keys.shape[-2]:  # beyond the reserve: grow (rare; correct either way)
            room = start + count + self.reserve
            self._keys = torch.cat([self._keys[..., :start, :], self._empty(key_states, room - start)], dim=-2)
            self._values = torch.cat([self._values[..., :start, :], self._empty(value_states, room - start)], dim=-2)
        self._keys[..., start : start + count, :] = key_states
        self._values[..., start : start + count, :] = value_states
        self._length = start + count
        self._expose()
        return self.keys, self.values

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0:
            self._keys = self._keys.repeat_interleave(repeats, dim=0)
            self._values = self._values.repeat_interleave(repeats, dim=0)
            self._expose()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.get_seq_length() > 0:
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._expose()

    def _expose(self) -> None:
        self.keys, self.values = self._keys[..., : self._length, :], self._values[..., : self._length, :]

    @staticmethod
    def _empty(like: torch.Tensor, length: int) -> torch.Tensor:
        return like.new_empty((*like.shape[:-2], length, like.shape[-1]))


def reserved_cache(reserve: int) -> DynamicCache:
    """A `DynamicCache` whose layers reserve `reserve` positions beyond the prefill (the response cap)."""
    layer = type("ReservedLayer", (ReservedLayer,), {"reserve": max(0, reserve)})
    cache = DynamicCache()
    Cache.__init__(cache, layer_class_to_replicate=layer)
    return cache
