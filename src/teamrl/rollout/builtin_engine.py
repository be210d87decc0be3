"""Batched sampling from an HF causal LM with a KV cache.

Why not `model.generate`: tree sampling needs K samples of each prompt (the prompt is encoded once
for its K samples), the log-prob of every sampled token under exactly the distribution the trainer
differentiates, and dropping finished rows from the batch as they end.

The model side of the loop is a decoder (`rollout/decoding.py`): the lean Llama-family step of
`rollout/lean_decode.py` where it applies, the HF forward otherwise; both give the same logits.

The distribution: `softmax(logits / temperature)`. `logprobs` are taken from it, and the trainer
recomputes the same quantity. top-k / top-p truncate what the sampler draws from; the log-prob under
the truncated distribution is kept too (`sampler_logprobs`) so the mismatch can be measured. With
top_k=0 and top_p=1 the two are identical and the sampler is exactly the trained policy.

One call samples every row with one `SamplingParams`: the rollout driver calls `sample` once per
agent, so agents with different settings (rollout.by_role) never share a batch. `sample_together`
samples several LoRA policies on one base in one call (one base matmul per projection for all their
rows, each adapter's delta on its own rows: `rollout/lora_rows.py`).

Streaming: `sample` and `sample_together` take an optional `on_tokens(rows, tokens)` that the decode loop
calls after every step with the rows that drew a token and the tokens drawn (host lists), so a server can
push each row's tokens to its client while the batch keeps decoding the others. It only reads what was
drawn: the draws, log-probs and Generations are those of a call without it, and without it the loop runs
as before (no extra host copy per step).

Stop strings: a response ends at the first stop string. The stop string is kept: it ends the text
the workflow reads, and the tokens up to the one that completed it are the trained response (their
log-probs and loss mask included); nothing after that token is sampled or trained. When that last
token reaches past the stop string (a BPE token "\\n\\nThe" for the stop "\\n\\n"), its extra
characters are trained but cut from the text: a token cannot be split without re-tokenizing, which
would train tokens that were never sampled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from teamrl.policies.cpu_linear import sampler_arithmetic
from teamrl.policies.loading import Policy
from teamrl.policies.scoring import left_pad
from teamrl.rollout.decoding import open_decoder, shares_one_call
from teamrl.rollout.stops import StopScanner
from teamrl.rollout.token_draw import draw_from_logits, draw_tokens

Token = TypeVar("Token")  # a token id, or in tests a string that decodes to itself

TokenSink = Callable[[list[int], list[int]], None]
"""on_tokens(rows, tokens): one decode step's drawn tokens; rows index the call's flat rows (prompt i's sample k
is row i * num_samples + k; in `sample_together` the policies' prompts count on from one another)."""

COMPACT_WHEN_FINISHED = 0.25
"""Drop finished rows from the decode batch once they are this fraction of it."""


@dataclass(frozen=True)
class SamplingParams:
    """How responses are drawn."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy (argmax)."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = off)."""
    top_k: int = 0
    """Keep only the k most likely tokens (0 = off)."""
    max_new_tokens: int = 48
    """Length cap of one response."""
    stop_strings: tuple[str, ...] = ()
    """Text that ends a response (besides the EOS / end-of-turn tokens); kept at the end of the text."""
    memory_gb: float = 2.0
    """Bound on one sampling call's KV cache and logits: a call that would need more samples its prompts in
    chunks that fit (the same tokens when greedy; sampled draws then come from the stream in another order)."""
    dtype: str = "float32"
    """The sampler's arithmetic: float32, or bfloat16 (bf16 copies of the weights, `sampler_arithmetic`; the
    log-probs reported are the bf16 model's)."""

    def __post_init__(self) -> None:
        if not self.memory_gb > 0:
            raise ValueError(f"memory_gb must be > 0, got {self.memory_gb}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0 or self.max_new_tokens < 1:
            raise ValueError("top_k must be >= 0 and max_new_tokens >= 1")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be float32 or bfloat16, got {self.dtype!r}")
        if not all(isinstance(s, str) and s for s in self.stop_strings):
            raise ValueError(f"stop_strings must be non-empty strings, got {self.stop_strings!r}")

    @property
    def logprob_temperature(self) -> float:
        """The temperature of `Generation.logprobs`: this one, or 1 for greedy decoding."""
        return self.temperature if self.temperature > 0 else 1.0


@dataclass
class Generation:
    """One sampled response."""

    prompt_ids: list[int]
    response_ids: list[int]  # [T] sampled tokens, the final stop token / stop string included (trained)
    logprobs: list[float]  # [T] log-prob of each token under softmax(logits / temperature)
    sampler_logprobs: list[float]  # [T] under the truncated (top-k/top-p) distribution drawn from
    text: str  # decoded response without the stop token, up to and including a stop string
    finished: bool  # ended by a stop token or string (False: cut at max_new_tokens)
    temperature: float | None = None  # of `logprobs` (1 for greedy); None: made elsewhere, the trainer's own


def stop_cut(decode: Callable[[list[Token]], str], ids: list[Token], stops: Sequence[str]) -> tuple[int, int] | None:
    """Where the first stop string ends a response: (n, end) or None when its text holds none.

    n: the fewest tokens whose text `decode(ids[:n])` contains a stop string; end: the character
    index just after the first-completed stop string in that text. Binary search over prefixes
    (a prefix's text contains a stop string when a shorter one does).

    >>> stop_cut("".join, list("ab||cd"), ["||", "c"])
    (4, 4)
    >>> stop_cut("".join, ["x", "ab", "cd"], ["bc"])
    (3, 4)
    >>> stop_cut("".join, list("abc"), ["z"]) is None
    True
    """

    def first_end(text: str) -> int | None:
        ends = [text.index(s) + len(s) for s in stops if s in text]
        return min(ends) if ends else None

    if not stops or first_end(decode(ids)) is None:
        return None
    low, high = 0, len(ids)  # decode(ids[:high]) holds a stop string, decode(ids[:low]) none
    while high - low > 1:
        mid = (low + high) // 2
        if first_end(decode(ids[:mid])) is None:
            low = mid
        else:
            high = mid
    end = first_end(decode(ids[:high]))
    assert end is not None  # decode(ids[:high]) holds a stop string
    return high, end


def trim_response(
    decode: Callable[[list[Token]], str], ids: list[Token], stop_ids: set[Token], stop_strings: Sequence[str]
) -> tuple[int, str, bool]:
    """Where a sampled response ends: (tokens kept, its text, whether a stop string cut it).

    A final stop token is kept (trained) but not decoded; a stop string cuts the tokens after the one
    that completed it and the text after the string (see the module doc). Every engine ends its
    responses with this, so they agree on what is trained.

    >>> trim_response("".join, list("ab||cd"), {"$"}, ["||"])
    (4, 'ab||', True)
    >>> trim_response("".join, list("ab$"), {"$"}, ["||"])
    (3, 'ab', False)
    """
    body = ids[:-1] if ids and ids[-1] in stop_ids else ids
    cut = stop_cut(decode, body, stop_strings)
    if cut is None:
        return len(ids), decode(body), False
    n, end = cut
    return n, decode(body[:n])[:end], True


def _filter_logits(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Set to -inf what top-k / top-p exclude. logits: [B, V]."""
    if top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        # drop a token when the mass before it already reaches top_p (the top token always stays)
        drop_sorted = (probs.cumsum(dim=-1) - probs) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def _choose(
    scaled: torch.Tensor, params: SamplingParams, truncated: bool, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step's tokens [R] from logits already divided by the log-prob temperature, with their log-probs
    under softmax(scaled) and under the distribution actually sampled (0 for greedy), both [R]."""
    if params.temperature > 0 and not truncated:  # the trained policy itself: draw and log-prob in one go
        chosen, logp = draw_from_logits(scaled, generator)
        return chosen, logp, logp
    logp = torch.log_softmax(scaled, dim=-1)
    if params.temperature == 0:
        chosen = scaled.argmax(dim=-1)
        sampler_logp = torch.zeros(len(chosen), device=scaled.device)
    else:
        filtered_logp = torch.log_softmax(_filter_logits(scaled, params.top_k, params.top_p), -1)
        chosen = draw_tokens(filtered_logp.exp(), generator)
        sampler_logp = filtered_logp.gather(-1, chosen[:, None]).squeeze(-1)
    return chosen, logp.gather(-1, chosen[:, None]).squeeze(-1), sampler_logp


@torch.no_grad()
def sample(
    policy: Policy,
    prompts: list[list[int]],
    num_samples: int,
    params: SamplingParams,
    generator: torch.Generator,
    on_tokens: TokenSink | None = None,
) -> list[list[Generation]]:
    """Draw `num_samples` responses for each prompt; result[i][k] is sample k of prompt i.

    on_tokens: called after every decode step with the rows that drew and their tokens (`TokenSink`).
    """
    if not prompts:
        return []
    if any(len(p) == 0 for p in prompts):
        raise ValueError("cannot sample from an empty prompt")
    chunk = prompts_per_call(policy.model, prompts, num_samples, params)
    if chunk < len(prompts):  # bounded memory: several calls of `chunk` prompts each
        return [
            group
            for start in range(0, len(prompts), chunk)
            for group in sample(
                policy,
                prompts[start : start + chunk],
                num_samples,
                params,
                generator,
                _shifted(on_tokens, start * num_samples),
            )
        ]
    return _sample_rows(policy, prompts, num_samples, params, generator, on_tokens=on_tokens)


def _shifted(on_tokens: TokenSink | None, offset: int) -> TokenSink | None:
    """`on_tokens` for a chunk whose rows start at `offset` of the whole call's."""
    if on_tokens is None or offset == 0:
        return on_tokens
    sink = on_tokens  # bound here: mypy does not narrow `on_tokens` inside the lambda
    return lambda rows, tokens: sink([offset + r for r in rows], tokens)


def can_sample_together(
    policies: Sequence[Policy], prompts: Sequence[list[list[int]]], num_samples: int, params: SamplingParams
) -> bool:
    """Whether `sample_together` can take these policies' prompts in one call: two or more LoRA adapters of
    one PEFT network with one tokenizer, on the lean decode path, within `params.memory_gb`."""
    if len(policies) < 2 or any(p.adapter is None for p in policies):
        return False
    first = policies[0]
    if any(p.network is not first.network or p.tokenizer is not first.tokenizer for p in policies):
        return False
    every = [prompt for group in prompts for prompt in group]
    if not every or any(len(p) == 0 for p in every):
        return False
    longest = max(map(len, every)) + params.max_new_tokens
    adapters = [p.adapter for p in policies if p.adapter is not None]  # all of them: none is None (above)
    if not shares_one_call(first.network, longest, adapters):
        return False
    return prompts_per_call(first.network, every, num_samples, params) >= len(every)


@torch.no_grad()
def sample_together(
    policies: Sequence[Policy],
    prompts: Sequence[list[list[int]]],
    num_samples: int,
    params: SamplingParams,
    generator: torch.Generator,
    on_tokens: TokenSink | None = None,
) -> list[list[list[Generation]]]:
    """`sample(policies[j], prompts[j], ...)` for every j, in one decode call when `can_sample_together`
    allows (else one call per policy, in order); result[j] is policy j's.

    The tokens are those of separate calls only in law: the random draws of all rows come from one
    stream, so with temperature > 0 a row's sample differs from the one a separate call would draw;
    greedy rows are the same tokens, and every log-prob is the adapter's own (tests/rollout/test_lora_rows.py).
    on_tokens: as in `sample`, its rows counting over all policies' prompts in order.
    """
    if not can_sample_together(policies, prompts, num_samples, params):
        out, offset = [], 0
        for p, group in zip(policies, prompts):
            out.append(sample(p, group, num_samples, params, generator, _shifted(on_tokens, offset)))
            offset += len(group) * num_samples
        return out
    every = [prompt for group in prompts for prompt in group]
    names = [p.adapter for p in policies if p.adapter is not None]
    assert len(names) == len(policies)  # can_sample_together: every policy is a LoRA adapter
    blocks = (names, [len(group) for group in prompts])
    rows = _sample_rows(policies[0], every, num_samples, params, generator, adapter_blocks=blocks, on_tokens=on_tokens)
    out, start = [], 0
    for group in prompts:
        out.append(rows[start : start + len(group)])
        start += len(group)
    return out


def _sample_rows(
    policy: Policy,
    prompts: list[list[int]],
    num_samples: int,
    params: SamplingParams,
    generator: torch.Generator,
    adapter_blocks: tuple[list[str], list[int]] | None = None,
    on_tokens: TokenSink | None = None,
) -> list[list[Generation]]:
    """One decode call over every prompt (see `sample`) in `params.dtype`; adapter_blocks: see `open_decoder`."""
    with sampler_arithmetic(params.dtype, policy.device):
        return _decode_rows(policy, prompts, num_samples, params, generator, adapter_blocks, on_tokens)


def _decode_rows(
    policy: Policy,
    prompts: list[list[int]],
    num_samples: int,
    params: SamplingParams,
    generator: torch.Generator,
    adapter_blocks: tuple[list[str], list[int]] | None,
    on_tokens: TokenSink | None = None,
) -> list[list[Generation]]:
    model, tok = policy.model, policy.tokenizer
    device = policy.device
    stop_ids = torch.tensor(policy.stop_token_ids(), device=device)
    was_training = model.training
    model.eval()

    ids, mask = left_pad(prompts, tok.pad_token_id)
    decoder = open_decoder(
        model, ids.to(device), mask.to(device), num_samples, params.max_new_tokens, adapter_blocks=adapter_blocks
    )
    logits = decoder.prefill_logits  # [B, V]
    if num_samples > 1:
        logits = logits.repeat_interleave(num_samples, dim=0)  # [B*K, V]
    rows, width = len(prompts) * num_samples, params.max_new_tokens
    truncated = params.top_k > 0 or params.top_p < 1.0
    tokens = torch.full((rows, width), tok.pad_token_id, dtype=torch.long, device=device)
    logps = torch.zeros((rows, width), device=device)
    sampler_logps = torch.zeros((rows, width), device=device)
    lengths = torch.zeros(rows, dtype=torch.long, device=device)
    finished = torch.zeros(rows, dtype=torch.bool, device=device)
    active = torch.arange(rows, device=device)  # original row of each batch row
    live = torch.ones(rows, dtype=torch.bool, device=device)  # batch rows still generating
    n_live = rows  # live.sum(), read once per step: the loop's one host sync
    fed = torch.full((rows,), tok.pad_token_id, dtype=torch.long, device=device)  # next input of each batch row
    scanner = StopScanner.of(tok, params.stop_strings, logits.shape[-1]) if params.stop_strings else None
    temperature = params.logprob_temperature

    for step in range(width):
        # Only live rows are sampled (finished rows still in the batch are skipped), so the random
        # stream, and the samples, do not depend on when finished rows are compacted away.
        all_live = n_live == len(live)
        in_batch = None if all_live else live.nonzero().squeeze(-1)
        scaled = logits if all_live else logits[in_batch]
        if temperature != 1.0:  # x / 1 is x: no pass over [R, V] for nothing
            scaled = scaled / temperature
        chosen, chosen_logp, sampler_logp = _choose(scaled, params, truncated, generator)
        rows_now = active if all_live else active[in_batch]
        tokens[rows_now, step] = chosen
        logps[rows_now, step] = chosen_logp
        sampler_logps[rows_now, step] = sampler_logp
        lengths[rows_now] = step + 1
        if on_tokens is not None:  # a streaming caller: hand this step's tokens out before the next forward
            on_tokens(rows_now.tolist(), chosen.tolist())
        done = torch.isin(chosen, stop_ids)
        if scanner is not None:
            done |= scanner.completed(tokens, rows_now, chosen, step)
        finished[rows_now] = done
        if all_live:
            live, fed = ~done, chosen
        else:
            assert in_batch is not None  # the live rows' batch positions, whenever not all are live
            live[in_batch[done]] = False
            fed[in_batch] = chosen
        n_live = int(live.sum())
        if n_live == 0 or step == width - 1:
            break
        if len(live) - n_live >= COMPACT_WHEN_FINISHED * len(live):
            # Finished rows leave the batch, so late decode steps only pay for live rows. Not at every
            # finish: each compaction copies the whole KV cache, which costs more than a few idle rows.
            keep = live.nonzero().squeeze(-1)
            decoder.keep(keep)
            active, live, fed = active[keep], live[keep], fed[keep]
        logits = decoder.step(fed)

    if was_training:
        model.train()
    return _collect(prompts, num_samples, tokens, logps, sampler_logps, lengths, finished, stop_ids, policy, params)


def row_bytes(model, sequence_length: int) -> int:
    """Memory one sampled row holds: its keys and values for `sequence_length` positions (fp32, every layer)
    plus three vocabulary-wide float32 rows (logits, log-probs, probabilities)."""
    config: Any = getattr(model, "config", None)  # an HF config (or None): its fields are dynamic attributes
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers = getattr(config, "num_hidden_layers", 0)
    heads = getattr(config, "num_key_value_heads", 0) or getattr(config, "num_attention_heads", 0)
    head_dim = getattr(config, "head_dim", 0) or (getattr(config, "hidden_size", 0) // max(1, heads))
    vocab = getattr(config, "vocab_size", 0)
    return 2 * layers * heads * head_dim * 4 * sequence_length + 3 * 4 * vocab


def prompts_per_call(model, prompts: list[list[int]], num_samples: int, params: SamplingParams) -> int:
    """How many of `prompts` one sampling call takes within `params.memory_gb` (at least one)."""
    per_prompt = num_samples * row_bytes(model, max(map(len, prompts)) + params.max_new_tokens)
    if per_prompt * len(prompts) <= params.memory_gb * 2**30:
        return len(prompts)
    return max(1, int(params.memory_gb * 2**30 // max(1, per_prompt)))


def _collect(
    prompts,
    num_samples,
    tokens,
    logps,
    sampler_logps,
    lengths,
    finished,
    stop_ids,
    policy: Policy,
    params: SamplingParams,
) -> list[list[Generation]]:
    """Cut the padded [rows, width] buffers into one Generation per row.

    A stop string cuts the tokens and log-probs where it cuts the text (see the module doc).
    """
    tok = policy.tokenizer

    def decode(ids: list[int]) -> str:
        return tok.decode(ids, skip_special_tokens=True)

    stop_set = set(stop_ids.tolist())
    tokens_l, logps_l, sampler_l = tokens.tolist(), logps.tolist(), sampler_logps.tolist()
    lengths_l, finished_l = lengths.tolist(), finished.tolist()
    results: list[list[Generation]] = []
    for i, prompt in enumerate(prompts):
        group = []
        for k in range(num_samples):
            row = i * num_samples + k
            n = lengths_l[row]
            n, text, cut = trim_response(decode, tokens_l[row][:n], stop_set, params.stop_strings)
            group.append(
                Generation(
                    list(prompt),
                    tokens_l[row][:n],
                    logps_l[row][:n],
                    sampler_l[row][:n],
                    text,
                    bool(finished_l[row]) or cut,
                    params.logprob_temperature,
                )
            )
        results.append(group)
    return results
