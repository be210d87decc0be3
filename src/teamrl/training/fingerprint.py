"""A run's fingerprint: digests of what it sampled and of the weights it ended with, to tell whether two
runs were the same run bit for bit.

Two runs can give equal results (success rates, validation curve) and still differ: a change to some
arithmetic moves a log-prob in its last bits, a token is sampled differently a few steps later, and the
runs part while their held-out numbers happen to agree. Comparing results cannot see that; comparing
these digests can, and says at which step the runs parted:

- `rollouts`: one digest per training step, of every sample's policy, agent, sampled token ids and their
  log-probs (the float64 bits the sampler returned), in the order the step trained on them. The first
  step's digest moves with any change to sampling or the forward pass; step k+1's with any change to
  step k's update, because the weights that sampled it are that update's output.
- `weights`: one digest per policy of the tensors its optimizer trains, after the last step, so the last
  update is covered too.

The per-step digests go into the loop's resumable state, so a resumed run has the same fingerprint as
an uninterrupted one. A run resumed from a checkpoint written before fingerprints existed has none for
its earlier steps; its fingerprint says so (`complete: false`) instead of being compared as a whole.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from teamrl.rollout.tree import Sample

DIGEST_CHARS = 16
"""Hex characters kept of each sha256: 64 bits, far past any chance collision between two runs."""


def samples_digest(samples: Iterable[Sample]) -> str:
    """The digest of one step's samples, in order: policy, agent, token ids and log-prob bits of each."""
    h = hashlib.sha256()
    for s in samples:
        ids, logprobs = s.generation.response_ids, s.generation.logprobs
        h.update(f"{s.policy}\0{s.agent}\0{len(ids)}\0".encode())
        h.update(struct.pack(f"<{len(ids)}q", *ids))
        h.update(struct.pack(f"<{len(logprobs)}d", *logprobs))
    return h.hexdigest()[:DIGEST_CHARS]


def tensors_digest(tensors: Iterable[torch.Tensor]) -> str:
    """The digest of tensors' dtypes, shapes and raw bytes, in order."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:DIGEST_CHARS]


class RunFingerprint:
    """Collects a training run's per-step rollout digests; a loop component (state_dict / load_state_dict)."""

    restorable_without_state = True  # a checkpoint written before fingerprints existed still resumes

    def __init__(self) -> None:
        self.rollouts: dict[int, str] = {}
        self.complete = True

    def add(self, step: int, samples: Iterable[Sample]) -> None:
        self.rollouts[step] = samples_digest(samples)

    def summary(self, optimizers: Mapping[str, Any]) -> dict[str, Any]:
        """{"rollouts": {"1": digest of step 1, ...}, "weights": {policy: digest}, "complete": bool}.

        optimizers: policy name -> its PolicyOptimizer; the tensors of its param groups are the weights.
        """
        weights = {
            name: tensors_digest(p for group in state.optimizer.param_groups for p in group["params"])
            for name, state in sorted(optimizers.items())
        }
        return {
            "rollouts": {str(step): self.rollouts[step] for step in sorted(self.rollouts)},
            "weights": weights,
            "complete": self.complete,
        }

    def state_dict(self) -> dict[str, Any]:
        return {"rollouts": {str(step): digest for step, digest in self.rollouts.items()}, "complete": self.complete}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """state None: the checkpoint predates fingerprints; the steps before it are unknown."""
        if state is None:
            self.rollouts, self.complete = {}, False
            return
        self.rollouts = {int(step): digest for step, digest in state["rollouts"].items()}
        self.complete = bool(state["complete"])


def first_difference(recorded: Mapping[str, Any], rerun: Mapping[str, Any]) -> str | None:
    """Where two runs' fingerprints part, in words, or None when they are equal (`summary`'s form; steps
    only one of them knows, as after a resume from a checkpoint without a fingerprint, are not compared).

    >>> a = {"rollouts": {"1": "aa", "2": "bb"}, "weights": {"p": "cc"}, "complete": True}
    >>> first_difference(a, a) is None
    True
    >>> first_difference(a, {**a, "rollouts": {"1": "aa", "2": "xx"}})
    "step 2's sampled tokens or their log-probs differ (step 1 is equal)"
    >>> first_difference(a, {**a, "weights": {"p": "dd"}})
    "the final weights of policy 'p' differ (every step's samples are equal)"
    """
    steps_a, steps_b = recorded.get("rollouts", {}), rerun.get("rollouts", {})
    if recorded.get("complete", True) and rerun.get("complete", True) and set(steps_a) != set(steps_b):
        return f"the runs trained {len(steps_a)} and {len(steps_b)} steps"
    equal: list[int] = []
    for step in sorted(set(steps_a) & set(steps_b), key=int):
        if steps_a[step] != steps_b[step]:
            if not equal:
                before = "" if step == "1" else " (no earlier step is compared)"
            else:
                before = " (step 1 is equal)" if equal == [1] else f" (steps {_spans(equal)} are equal)"
            return f"step {step}'s sampled tokens or their log-probs differ{before}"
        equal.append(int(step))
    weights_a, weights_b = recorded.get("weights", {}), rerun.get("weights", {})
    for name in sorted(set(weights_a) | set(weights_b)):
        if weights_a.get(name) != weights_b.get(name):
            return f"the final weights of policy {name!r} differ (every step's samples are equal)"
    return None


def _spans(steps: list[int]) -> str:
    """'1-3' for consecutive steps [1, 2, 3], else the list: '4, 6'."""
    if steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]}-{steps[-1]}"
    return ", ".join(map(str, steps))
