"""Which engine samples a policy: the built-in one (`teamrl.rollout.engine`), unless another serves it.

`rollout.engine: vllm` gives some policies an engine of their own (`teamrl.rollout.vllm_engine`);
`serve` records that here, and `sample` (the function the rollout driver calls) sends each call to
the policy's engine. Every engine keeps the built-in `sample(policy, prompts, num_samples, params,
generator)` contract, so the driver, tree sampling and every workflow run unchanged.

The record is kept here, keyed by the policy object, not on the policy: a policy is pickled to Ray
actors and deep-copied for KL references, and neither may drag an engine (a process-wide resource)
along. A copy of a policy is therefore sampled by the built-in engine, which is always correct.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from teamrl.policies.loading import Policy
from teamrl.rollout import engine as builtin
from teamrl.rollout.engine import Generation, SamplingParams


@dataclass(frozen=True)
class SampleRequest:
    """The arguments of one `sample` call but the generator: for `sample_many`."""

    policy: Policy
    prompts: list[list[int]]
    num_samples: int
    params: SamplingParams


class Sampler(Protocol):
    """An engine: draws `num_samples` responses per prompt for a policy it serves (see `engine.sample`)."""

    def sample(self, policy: Policy, prompts: list[list[int]], num_samples: int, params: SamplingParams,
               generator: torch.Generator) -> list[list[Generation]]: ...

    def close(self) -> None: ...


# id(policy) -> (a weak reference to it, its engine). The weak reference tells a live policy from a
# new object that reuses a dead one's id.
_SERVED: dict[int, tuple[weakref.ReferenceType, Sampler]] = {}


def serve(policy: Policy, sampler: Sampler) -> None:
    """From now on `sample(policy, ...)` runs on `sampler`."""
    key = id(policy)
    _SERVED[key] = (weakref.ref(policy, lambda _ref, key=key: _SERVED.pop(key, None)), sampler)


def served_by(policy: Policy) -> Sampler | None:
    """The engine serving `policy`, or None for the built-in one."""
    entry = _SERVED.get(id(policy))
    return entry[1] if entry is not None and entry[0]() is policy else None


# id(policy) -> optimizer steps noted by `note_update` (read by engines that hold a copy of the weights).
_UPDATES: dict[int, int] = {}


def note_update(policy: Policy) -> None:
    """Record that an optimizer step changed `policy`'s weights in place.

    An engine holding its own copy of the weights (vLLM) tells a change by the tensors' version
    counters, but a fused AdamW step (train.adamw: fused, the default) writes the weights without
    bumping them (torch 2.13); the update calls this after every step so the change is still seen.
    """
    _UPDATES[id(policy)] = _UPDATES.get(id(policy), 0) + 1


def updates_noted(policy: Policy) -> int:
    """How many optimizer steps `note_update` recorded for `policy`."""
    return _UPDATES.get(id(policy), 0)


def release(policies: dict[str, Policy]) -> None:
    """Close the engines serving these policies; afterwards they sample with the built-in engine."""
    engines = {}
    for policy in policies.values():
        sampler = served_by(policy)
        if sampler is not None:
            engines[id(sampler)] = sampler
            _SERVED.pop(id(policy), None)
    for sampler in engines.values():
        sampler.close()


def sample(policy: Policy, prompts: list[list[int]], num_samples: int, params: SamplingParams,
           generator: torch.Generator) -> list[list[Generation]]:
    """`engine.sample`'s contract, run by the engine that serves `policy`."""
    sampler = served_by(policy)
    if sampler is None:
        return builtin.sample(policy, prompts, num_samples, params, generator)
    return sampler.sample(policy, prompts, num_samples, params, generator)


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
            raise ValueError(f"policies {', '.join(p.name for p in group)} share one full network; give each "
                             "its own copy or make them LoRA adapters")
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
            together = [i for i in range(j, len(requests)) if results[i] is None and _same_builtin_call(request, requests[i])]
            batch = [requests[i] for i in together]
            if len(together) > 1:  # one decode call where it can be (else one call per request, in order)
                outs = builtin.sample_together([r.policy for r in batch], [r.prompts for r in batch],
                                               request.num_samples, request.params, generator)
                for i, result in zip(together, outs):
                    results[i] = result
                continue
        if getattr(sampler, "sample_batch", None) is None:
            results[j] = sample(request.policy, request.prompts, request.num_samples, request.params, generator)
            continue
        together = [i for i in range(j, len(requests)) if results[i] is None and served_by(requests[i].policy) is sampler]
        for i, result in zip(together, sampler.sample_batch([requests[i] for i in together], generator)):
            results[i] = result
    return results


def _same_builtin_call(first: SampleRequest, other: SampleRequest) -> bool:
    """Whether `other` can join `first` in one built-in call: LoRA adapters of one network, same settings."""
    return (served_by(other.policy) is None and first.policy.adapter is not None
            and other.policy.network is first.policy.network and other.num_samples == first.num_samples
            and other.params == first.params)
