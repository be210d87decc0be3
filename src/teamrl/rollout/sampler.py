"""The engine contract and the record of which engine serves a policy.

`Sampler` is what every engine keeps: the built-in `sample(policy, prompts, num_samples, params,
generator)` contract, so the driver, tree sampling and every workflow run unchanged whichever engine
samples. `serve` records that an engine (vLLM's, `teamrl.rollout.vllm_engine`) samples a policy from
now on; `teamrl.rollout.engine_routing` reads the record to send each call to its engine.

The record is kept here, keyed by the policy object, not on the policy: a policy is pickled to Ray
actors and deep-copied for KL references, and neither may drag an engine (a process-wide resource)
along. A copy of a policy is therefore sampled by the built-in engine, which is always correct.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Protocol

import torch

from teamrl.policies.loading import Policy
from teamrl.rollout.builtin_engine import Generation, SamplingParams, TokenSink


@dataclass(frozen=True)
class SampleRequest:
    """The arguments of one `sample` call but the generator: for `sample_many`."""

    policy: Policy
    prompts: list[list[int]]
    num_samples: int
    params: SamplingParams
    on_tokens: TokenSink | None = None  # streaming: each decode step's tokens of these rows (built-in engine)


class Sampler(Protocol):
    """An engine: draws `num_samples` responses per prompt for a policy it serves (see `builtin_engine.sample`)."""

    def sample(
        self,
        policy: Policy,
        prompts: list[list[int]],
        num_samples: int,
        params: SamplingParams,
        generator: torch.Generator,
    ) -> list[list[Generation]]: ...

    def close(self) -> None: ...


# id(policy) -> (a weak reference to it, its engine). The weak reference tells a live policy from a
# new object that reuses a dead one's id.
_SERVED: dict[int, tuple[weakref.ReferenceType, Sampler]] = {}


def serve(policy: Policy, sampler: Sampler) -> None:
    """From now on `sample(policy, ...)` runs on `sampler`."""
    key = id(policy)

    def forget(_ref: object) -> None:
        _SERVED.pop(key, None)

    _SERVED[key] = (weakref.ref(policy, forget), sampler)


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
