"""A lean decode step for the Llama family (Llama, Qwen2, Phi-3), on the HF model's own parameters.

Why: a decode step of a small model through the HF forward spends most of its time outside the
matrix multiplies. A profile of the engine on the tiny default (256 rows, 1 thread) put 59% of a
sampling call in `scaled_dot_product_attention` (its CPU kernel is built for long queries, not for
one query per row: ~5 ms per layer where the arithmetic needs well under 1 ms), and much of the rest
in per-call glue (cache bookkeeping, mask building, module calls). Here one decode step is the
arithmetic of the architecture and nothing else:

- the prompt's keys and values, made by one HF prefill forward, are kept once per prompt, not once
  per sample: the K samples of a prompt read them with one batched matmul whose rows are the K
  samples' queries (a row-by-row attention reads the same prompt keys K times, and at 256 rows that
  memory traffic costs as much as the projections);
- the response's keys and values go into a static buffer [max_new_tokens, rows, kv heads, head dim]
  reserved at prefill; step t writes slice t, every row at the same step (all rows start
  decoding together after a left-padded prompt), so no mask is built and nothing is concatenated;
- the rotary cos/sin of every position are computed once per call by the model's own rotary module;
- attention is two small matmuls and one softmax over [prompt scores, response scores].

Prompts that begin with the same tokens (a system prompt, worked examples, one question put to
duplicated agents) prefill that prefix once (`prefill`): on the real studies' chat prompts 80% of the
prompt tokens are such a prefix, and an evaluation's prefill is most of its time.

The same logits as the HF forward (tests: 1e-5 of the largest logit in fp32). `lean_unsupported`
says when a model is outside what this reproduces exactly; the engine then uses the HF forward.

PEFT LoRA projections are computed from their parts (`lora_rows.py`), and the rows of one call may run
different adapters on the one base: the prompts of adapter block i are prefilled with that adapter
active, and every decode step does one base matmul per projection plus each block's rank-r delta.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import DynamicCache

from teamrl.policies.cpu_linear import drop_stale_packs
from teamrl.policies.prompt_prefix import (
    MIN_SHARED_PREFIX,
    forward_prefix_once,
    shared_prefix,
)
from teamrl.policies.scoring import cache_keyword
from teamrl.rollout.lora_rows import RowAdapters, lora_unsupported, project

# A Hugging Face model or one of its submodules: their children (`model.layers`, `self_attn`, ...) are
# attributes torch's typing cannot see, so they are read as Any.
HFModule = Any

LEAN_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Phi3ForCausalLM")
"""Model classes whose decoder layers `LeanDecoder` reproduces (pre-norm, rotary, SwiGLU/SiLU MLP)."""
POSITION_FREE_ROPE = ("default", "linear", "llama3")
"""Rotary types whose frequencies do not depend on the sequence length (so one table serves a call)."""


def lean_unsupported(model: HFModule, max_length: int, adapters: Sequence[str | None] = (None,)) -> str | None:
    """Why `LeanDecoder` cannot decode `model` exactly up to `max_length` positions with the PEFT LoRA
    `adapters` (None: the base alone); None when it can. `model` is the base (the model under PEFT's)."""
    name = type(model).__name__
    if name not in LEAN_ARCHITECTURES:
        return f"architecture {name} is not one of {', '.join(LEAN_ARCHITECTURES)}"
    config = model.config
    if any(t != "full_attention" for t in getattr(config, "layer_types", None) or ()):
        return "sliding-window attention layers"
    window = getattr(config, "sliding_window", None)
    if name == "Phi3ForCausalLM" and window is not None and max_length > window:
        return f"sequences of {max_length} positions exceed the sliding window of {window}"
    rope = getattr(model.model.rotary_emb, "rope_type", "default")
    if rope not in POSITION_FREE_ROPE:
        return f"rotary type {rope!r} depends on the sequence length"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r} (only silu)"
    for module in model.modules():
        # hooks (accelerate offload, adapters, probes) would be skipped by calling weights directly
        if module._forward_hooks or module._forward_pre_hooks:
            return f"forward hooks on {type(module).__name__}"
    linears = [model.lm_head] + [
        m for layer in _layers(model) for m in (*layer.qkv, layer.o_proj, *layer.gate_up, layer.down)
    ]
    for module in linears:  # a quantised layer or a LoRA variant computes more than W x + b (+ B A x)
        problem = lora_unsupported(module, adapters)
        if problem is not None:
            return problem
    return None


def _rms_norm(x: torch.Tensor, norm: HFModule) -> torch.Tensor:
    """The HF Llama/Qwen2/Phi-3 RMSNorm: normalise in fp32, scale in the input dtype."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * h.to(x.dtype)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x [R, heads, D] with cos/sin [R, 1, rot] (rot <= D: Phi-3's partial rotary)."""
    rot = cos.shape[-1]
    x_rot = x[..., :rot]
    half = rot // 2
    rotated = torch.cat((-x_rot[..., half:], x_rot[..., :half]), dim=-1)
    out = x_rot * cos + rotated * sin
    return out if rot == x.shape[-1] else torch.cat((out, x[..., rot:]), dim=-1)


@dataclass
class _Layer:
    """One decoder layer's own modules (no copies: training updates are seen at once)."""

    input_norm: HFModule
    post_norm: HFModule
    qkv: tuple[nn.Linear, ...]  # (q, k, v) projections, or Phi-3's one fused qkv_proj
    o_proj: nn.Linear
    gate_up: tuple[nn.Linear, ...]  # (gate, up), or Phi-3's one fused gate_up_proj
    down: nn.Linear


def _layers(model: HFModule) -> list[_Layer]:
    out = []
    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        qkv = (attn.qkv_proj,) if hasattr(attn, "qkv_proj") else (attn.q_proj, attn.k_proj, attn.v_proj)
        gate_up = (mlp.gate_up_proj,) if hasattr(mlp, "gate_up_proj") else (mlp.gate_proj, mlp.up_proj)
        out.append(
            _Layer(layer.input_layernorm, layer.post_attention_layernorm, qkv, attn.o_proj, gate_up, mlp.down_proj)
        )
    return out


@dataclass
class Prefill:
    """One block of prompts after its prefill: the last token's hidden state [b, d] (final norm applied)
    and per layer the keys and values [b, Hkv, W, D] of W prompt columns, of which `mask` [b, W] says
    which hold a token (the others are padding, masked out of attention)."""

    last_hidden: torch.Tensor
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    mask: torch.Tensor

    def widened(self, width: int) -> Prefill:
        """The same prompts over `width` columns: empty (masked) columns added on the left."""
        extra = width - self.mask.shape[1]
        if extra == 0:
            return self
        pad = lambda t: F.pad(t, (0, 0, extra, 0))  # noqa: E731 (dim -2, the columns)
        return Prefill(
            self.last_hidden, [pad(k) for k in self.keys], [pad(v) for v in self.values], F.pad(self.mask, (extra, 0))
        )


def prefill(network: HFModule, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> Prefill:
    """The HF forward of left-padded prompts ids/mask/positions [b, P] (`network`: the model's decoder
    stack, `model.model`), keeping every layer's keys and values.

    A prompt that appears several times (duplicated agents asked one question) is computed once and
    its results repeated; the distinct prompts go through `prefill_distinct`."""
    rows = ids.shape[0]
    distinct, inverse = torch.unique(ids.masked_fill(mask == 0, -1), dim=0, return_inverse=True)
    if len(distinct) == rows:
        return prefill_distinct(network, ids, mask, positions)
    first = torch.full((len(distinct),), rows, device=ids.device).scatter_reduce(
        0, inverse, torch.arange(rows, device=ids.device), reduce="amin"
    )  # each distinct prompt's first row
    part = prefill_distinct(network, ids[first], mask[first], positions[first])
    return Prefill(
        part.last_hidden[inverse],
        [k[inverse] for k in part.keys],
        [v[inverse] for v in part.values],
        part.mask[inverse],
    )


def prefill_distinct(network: HFModule, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> Prefill:
    """`prefill` of prompts none of which repeats another.

    Prompts that share a prefix of `MIN_SHARED_PREFIX` tokens or more compute it once: the prefix is
    run as one sequence, its keys and values are repeated for every prompt, and each prompt's own
    tokens are run after it. A prompt's columns are then [prefix | padding | its own tokens]; attention
    does not depend on the order of keys (their positions are in the rotary already), so this is the
    same arithmetic as the whole prompts' prefill, with fewer tokens through the layers."""
    keyword = cache_keyword(network)

    def run(input_ids, attention_mask, position_ids, cache):
        return network(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
            **{keyword: cache},
        ).last_hidden_state  # final norm applied

    common = shared_prefix(ids, mask)
    if common < MIN_SHARED_PREFIX:
        cache = DynamicCache()
        hidden = run(ids, mask, positions, cache)
    else:
        hidden, cache, mask = forward_prefix_once(run, ids, mask, common)
    return Prefill(
        hidden[:, -1, :], [layer.keys for layer in cache.layers], [layer.values for layer in cache.layers], mask
    )


class LeanDecoder:
    """Decode steps of a Llama-family model after an HF prefill of left-padded prompts.

    Rows: prompt i's K samples are rows i*K .. i*K+K-1 (as `repeat_interleave` lays them out). Rows
    that finish leave with `keep`; a prompt whose samples have all left is dropped too.
    """

    def __init__(
        self,
        model: HFModule,
        ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        repeats: int,
        reserve: int,
        adapters: RowAdapters | None = None,
        activate: Callable[[str | None], None] | None = None,
    ) -> None:
        """Prefill ids/mask/positions [B, P] with the HF forward; room for `reserve` decode steps.

        adapters: the LoRA adapter of each block of *prompts* (None: whatever `model` runs now, for every
        prompt); with several blocks, `activate(name)` makes PEFT run adapter `name` for its prefill.
        """
        config = model.config
        self.model = model
        self.layers = _layers(model)
        drop_stale_packs(model)  # packed weights (`packed_linear`) written through `.data` since they were packed
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = model.model.layers[0].self_attn.head_dim
        self.scaling = model.model.layers[0].self_attn.scaling
        self.repeats = repeats
        blocks = (adapters or RowAdapters.one(None, ids.shape[0])).spans()
        if len(blocks) > 1 and activate is None:
            raise ValueError("several adapter blocks need `activate` to prefill each with its own adapter")
        parts, logits = [], []
        for name, start, end in blocks:  # one HF prefill per adapter block (the HF forward runs one adapter)
            if activate is not None and len(blocks) > 1:
                activate(name)
            part = prefill(model.model, ids[start:end], mask[start:end], positions[start:end])
            logits.append(project(part.last_hidden, model.lm_head, RowAdapters.one(name, end - start)))
            parts.append(part)
        width = max(part.mask.shape[1] for part in parts)  # blocks with a shared prefix may be narrower
        parts = [part.widened(width) for part in parts]

        def joined(tensors: list[torch.Tensor] | tuple[torch.Tensor, ...]) -> torch.Tensor:  # no copy for one block
            return tensors[0] if len(tensors) == 1 else torch.cat(tensors)

        self.prefill_logits = joined(logits).float()  # [B, V]
        # per layer [B, Hkv, W, D]; post-rotary keys, as the HF cache holds them
        self.k_prompt = [joined(layer) for layer in zip(*(part.keys for part in parts))]
        # one dtype for the whole cache: under the bf16 sampler's autocast the prefill leaves bf16 values beside
        # fp32 (post-rotary) keys; cast once here, not at every decode step
        self.v_prompt = [joined(layer).to(self.k_prompt[0].dtype) for layer in zip(*(part.values for part in parts))]
        key_mask = joined([part.mask for part in parts])  # [B, W]: which prompt columns hold a token
        self.rows = RowAdapters.blocks([n for n, _, _ in blocks], [(e - s) * repeats for _, s, e in blocks])
        self.prompt_bias = torch.zeros(key_mask.shape, dtype=self.k_prompt[0].dtype, device=ids.device)
        self.prompt_bias = self.prompt_bias.masked_fill(key_mask == 0, float("-inf"))[:, None, None, :]  # [B,1,1,W]
        rows = ids.shape[0] * repeats
        # time-major: the first t steps of every row are one dense block (read faster than t of T
        # columns per row: measured 27% less time for the scores, 41% for the weighted values)
        shape = (max(reserve, 1), rows, self.kv_heads, self.head_dim)
        self.k_resp = [self.k_prompt[0].new_zeros(shape) for _ in self.layers]  # [T, R, Hkv, D]
        self.v_resp = [self.k_prompt[0].new_zeros(shape) for _ in self.layers]
        self.filled = 0  # response columns written so far
        self.next_pos = (positions[:, -1] + 1).repeat_interleave(repeats)  # [R]
        span = int(positions.max()) + reserve + 2
        probe = torch.arange(span, device=ids.device)[None, :]
        cos, sin = model.model.rotary_emb(self.k_prompt[0], probe)
        self.cos, self.sin = cos[0], sin[0]  # [span, rot]
        self.slot: torch.Tensor | None = None  # [R] each row's place in the [B*K] grid; None: row r is slot r

    def _linear(self, x: torch.Tensor, layer: HFModule) -> torch.Tensor:
        return project(x, layer, self.rows)

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._linear(_rms_norm(hidden, self.model.model.norm), self.model.lm_head).float()

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row [R]; return next-token logits [R, V] (fp32)."""
        x = F.embedding(tokens, self.model.model.embed_tokens.weight)  # [R, d]
        cos, sin = self.cos[self.next_pos][:, None, :], self.sin[self.next_pos][:, None, :]  # [R, 1, rot]
        rows, heads, kv, dim = x.shape[0], self.heads, self.kv_heads, self.head_dim
        if self.filled >= self.k_resp[0].shape[0]:
            raise RuntimeError(f"decoded past the {self.k_resp[0].shape[0]} reserved steps")
        for i, layer in enumerate(self.layers):
            h = _rms_norm(x, layer.input_norm)
            if len(layer.qkv) == 1:
                q, k, v = self._linear(h, layer.qkv[0]).split([heads * dim, kv * dim, kv * dim], dim=-1)
            else:
                q, k, v = (self._linear(h, proj) for proj in layer.qkv)
            q = _rope(q.view(rows, heads, dim), cos, sin)
            self.k_resp[i][self.filled] = _rope(k.view(rows, kv, dim), cos, sin)
            self.v_resp[i][self.filled] = v.view(rows, kv, dim)
            x = x + self._linear(self._attend(i, q * self.scaling), layer.o_proj)
            h = _rms_norm(x, layer.post_norm)
            if len(layer.gate_up) == 1:
                gate, up = self._linear(h, layer.gate_up[0]).chunk(2, dim=-1)
            else:
                gate, up = (self._linear(h, proj) for proj in layer.gate_up)
            x = x + self._linear(up * F.silu(gate), layer.down)
        self.filled += 1
        self.next_pos = self.next_pos + 1
        return self._logits(x)

    def _attend(self, i: int, q: torch.Tensor) -> torch.Tensor:
        """Attention of scaled queries q [R, H, D] over the prompt and the response so far: [R, H*D].

        Always in the cache's dtype, also inside the bf16 sampler's autocast: there autocast would cast the whole
        cache to bf16 at every matmul of every step (measured on the main job: 4x the casts of an fp32 step), for
        matmuls of a few hundred FLOPs a byte that bf16 does not speed up."""
        if torch.is_autocast_enabled(q.device.type):
            with torch.autocast(q.device.type, enabled=False):
                return self._attend_exact(i, q.to(self.k_prompt[i].dtype))
        return self._attend_exact(i, q)

    def _attend_exact(self, i: int, q: torch.Tensor) -> torch.Tensor:
        rows, kv, dim = q.shape[0], self.kv_heads, self.head_dim
        group = self.heads // kv
        prompts = self.k_prompt[i].shape[0]
        width = self.k_prompt[i].shape[2]
        qg = q.view(rows, kv, group, dim)  # [R, Hkv, G, D]: GQA query heads grouped by their kv head
        k_resp, v_resp = self.k_resp[i][: self.filled + 1], self.v_resp[i][: self.filled + 1]  # [t, R, Hkv, D]
        s_resp = torch.matmul(qg, k_resp.permute(1, 2, 3, 0))  # [R, Hkv, G, t]
        # prompt part: the K samples' queries of a prompt as the rows of one matmul per (prompt, kv head)
        grid = self._to_grid(qg, prompts)  # [B, Hkv, K*G, D]
        s_prompt = torch.matmul(grid, self.k_prompt[i].transpose(-1, -2)) + self.prompt_bias  # [B, Hkv, K*G, P]
        s_prompt = self._from_grid(s_prompt, group)  # [R, Hkv, G, P]
        # softmax in fp32 as HF's eager attention does (a no-op cast for fp32 models)
        weights = torch.softmax(torch.cat([s_prompt, s_resp], dim=-1), dim=-1, dtype=torch.float32).to(q.dtype)
        w_prompt, w_resp = weights[..., :width], weights[..., width:]
        out = torch.matmul(w_resp, v_resp.permute(1, 2, 0, 3))  # [R, Hkv, G, D]
        out = out + self._from_grid(torch.matmul(self._to_grid(w_prompt, prompts), self.v_prompt[i]), group)
        return out.reshape(rows, self.heads * dim)

    def _to_grid(self, per_row: torch.Tensor, prompts: int) -> torch.Tensor:
        """[R, Hkv, G, X] per row -> [B, Hkv, K*G, X] per prompt (rows that left: zeros)."""
        _, kv, group, width = per_row.shape
        if self.slot is not None:
            full = per_row.new_zeros((prompts * self.repeats, kv, group, width))
            per_row = full.index_copy_(0, self.slot, per_row)
        grid = per_row.view(prompts, self.repeats, kv, group, width).transpose(1, 2)
        return grid.reshape(prompts, kv, self.repeats * group, width)

    def _from_grid(self, grid: torch.Tensor, group: int) -> torch.Tensor:
        """[B, Hkv, K*G, X] per prompt -> [R, Hkv, G, X] for the rows still in the batch."""
        prompts, kv, _, width = grid.shape
        per_row = grid.view(prompts, kv, self.repeats, group, width).transpose(1, 2)
        per_row = per_row.reshape(prompts * self.repeats, kv, group, width)
        return per_row if self.slot is None else per_row.index_select(0, self.slot)

    def _select_filled(self, buffer: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """buffer [T, R, Hkv, D] for `rows` only; copies just the filled steps (early drops are cheap)."""
        out = buffer.new_empty((buffer.shape[0], len(rows), *buffer.shape[2:]))
        torch.index_select(buffer[: self.filled], 1, rows, out=out[: self.filled])
        return out

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only batch rows `rows` (ascending indices into the current batch)."""
        self.k_resp = [self._select_filled(k, rows) for k in self.k_resp]
        self.v_resp = [self._select_filled(v, rows) for v in self.v_resp]
        self.next_pos = self.next_pos[rows]
        self.rows = self.rows.keep(rows)
        slot = rows if self.slot is None else self.slot[rows]
        prompt_of = torch.div(slot, self.repeats, rounding_mode="floor")
        present = torch.unique(prompt_of)  # sorted; prompts with a row left
        if len(present) < self.k_prompt[0].shape[0]:
            self.k_prompt = [k.index_select(0, present) for k in self.k_prompt]
            self.v_prompt = [v.index_select(0, present) for v in self.v_prompt]
            self.prompt_bias = self.prompt_bias.index_select(0, present)
            slot = torch.searchsorted(present, prompt_of) * self.repeats + slot % self.repeats
        dense = len(slot) == len(present) * self.repeats
        self.slot = None if dense else slot
