"""Which engine samples a policy: the built-in one (`teamrl.rollout.builtin_engine`), unless another serves it.

`rollout.engine: vllm` gives some policies an engine of their own (`teamrl.rollout.vllm_engine`),
recorded by `teamrl.rollout.sampler.serve`; `sample` (the function the rollout driver calls) sends
each call to the policy's engine. Every engine keeps the built-in `sample(policy, prompts,
num_samples, params, generator)` contract (`teamrl.rollout.sampler.Sampler`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from teamrl.policies.loading import Policy
from teamrl.rollout import builtin_engine as builtin
from teamrl.rollout.builtin_engine import Generation, SamplingParams, TokenSink
from teamrl.rollout.sampler import SampleRequest, serve, served_by


def sample(
    policy: Policy,
    prompts: list[list[int]],
    num_samples: int,
    params: SamplingParams,
    generator: torch.Generator,
    on_tokens: TokenSink | None = None,
) -> list[list[Generation]]:
    """`engine.sample`'s contract, run by the engine that serves `policy`.

    on_tokens: each decode step's tokens (`builtin_engine.TokenSink`); only the built-in engine calls it,
    other engines hand their answers over whole."""
    sampler = served_by(policy)
    if sampler is None:
        if on_tokens is None:  # the rollout driver's call, unchanged
            return builtin.sample(policy, prompts, num_samples, params, generator)
        return builtin.sample(policy, prompts, num_samples, params, generator, on_tokens)
    return sampler.sample(policy, prompts, num_samples, params, generator)


def context_length(policy: Policy) -> int | None:
    """Prompt plus response tokens one call of `policy` may hold: its engine's limit where the engine sets one
    (`max_model_len`: a vLLM engine caps its context at `vllm_engine.MAX_MODEL_LEN`), else the model's
    `max_position_embeddings` (None where the model names none)."""
    model = getattr(policy.network.config, "max_position_embeddings", None)
    engine = getattr(served_by(policy), "max_model_len", None)
    limits = [n for n in (model, engine) if n]
    return min(limits) if limits else None


def serve_with_vllm(policies: dict[str, Policy], kv_cache_gb: float, seed: int = 0) -> None:
    """Start the vLLM engines of `rollout.engine: vllm` and route these policies' sampling to them.

    One engine per base model: a full policy has its own, the LoRA policies on one base share one
    (their requests carry their adapters). Policies whose network is already served keep their engine.
    """
    from teamrl.rollout.vllm_engine import VllmEngine

    groups: dict[int, list[Policy]] = {}
    for policy in policies.values():
        if served_by(policy) is None:
            groups.setdefault(id(policy.network), []).append(policy)
    for group in groups.values():
        if group[0].adapter is None and len(group) > 1:  # full policies sharing one network object
            raise ValueError(
                f"policies {', '.join(p.name for p in group)} share one full network; give each "
                "its own copy or make them LoRA adapters"
            )
        engine = VllmEngine(group, kv_cache_gb, seed)
        for policy in group:
            serve(policy, engine)


def sample_many(requests: Sequence[SampleRequest], generator: torch.Generator) -> list[list[list[Generation]]]:
    """Several `sample` calls: result[j] is request j's. The requests whose policies one engine serves
    go to it together when it samples batches (`sample_batch`: a vLLM engine with the adapters of
    several LoRA policies samples them in one batch); on the built-in engine, the requests of LoRA
    policies on one base with the same settings are one call (`engine.sample_together`); the rest run
    one by one, in order.

    Deterministic for a generator state. Where nothing is batched, the same as calling `sample` on each
    request in order.
    """
    results: list[list[list[Generation]] | None] = [None] * len(requests)
    for j, request in enumerate(requests):
        if results[j] is not None:
            continue
        sampler = served_by(request.policy)
        if sampler is None:
            together = [
                i for i in range(j, len(requests)) if results[i] is None and _same_builtin_call(request, requests[i])
            ]
            batch = [requests[i] for i in together]
            if len(together) > 1:  # one decode call where it can be (else one call per request, in order)
                outs = builtin.sample_together(
                    [r.policy for r in batch],
                    [r.prompts for r in batch],
                    request.num_samples,
                    request.params,
                    generator,
                    _split_sink(batch),
                )
                for i, result in zip(together, outs):
                    results[i] = result
                continue
        sample_batch = getattr(sampler, "sample_batch", None)  # an optional hook of engines that batch
        if sample_batch is None:
            args = (request.policy, request.prompts, request.num_samples, request.params, generator)
            results[j] = sample(*args) if request.on_tokens is None else sample(*args, request.on_tokens)
            continue
        together = [
            i for i in range(j, len(requests)) if results[i] is None and served_by(requests[i].policy) is sampler
        ]
        for i, result in zip(together, sample_batch([requests[i] for i in together], generator)):
            results[i] = result
    done = [result for result in results if result is not None]
    assert len(done) == len(results)  # every request was sampled
    return done


def _split_sink(requests: Sequence[SampleRequest]) -> TokenSink | None:
    """One call's token sink that hands each request's rows (renumbered from 0) to that request's own."""
    if all(r.on_tokens is None for r in requests):
        return None
    owner: list[tuple[TokenSink | None, int]] = []  # flat row -> (its request's sink, its row there)
    for r in requests:
        owner += [(r.on_tokens, row) for row in range(len(r.prompts) * r.num_samples)]

    def split(rows: list[int], tokens: list[int]) -> None:
        parts: dict[int, tuple[TokenSink, list[int], list[int]]] = {}
        for row, token in zip(rows, tokens, strict=True):
            sink, local = owner[row]
            if sink is not None:
                part = parts.setdefault(id(sink), (sink, [], []))
                part[1].append(local)
                part[2].append(token)
        for sink, local_rows, local_tokens in parts.values():
            sink(local_rows, local_tokens)

    return split


def _same_builtin_call(first: SampleRequest, other: SampleRequest) -> bool:
    """Whether `other` can join `first` in one built-in call: LoRA adapters of one network, same settings."""
    return (
        served_by(other.policy) is None
        and first.policy.adapter is not None
        and other.policy.network is first.policy.network
        and other.num_samples == first.num_samples
        and other.params == first.params
    )
