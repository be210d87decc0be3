"""What every update backend shares: the update settings, its protocol, and one policy's update.

The backends (`local`, `ray_backend` and its `worker` actors) import this module; the package
(`teamrl.training.backends.make_backend`) picks one of them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from teamrl.config import AlgorithmConfig
from teamrl.rollout.tree import Sample
from teamrl.training.update import PolicyOptimizer, update_policy

# (policy name, its optimizer) -> a per-role gradient tracker for `update_policy`, or None.
TrackerFactory = Callable[[str, PolicyOptimizer], Any]


@dataclass
class UpdateSettings:
    """What every policy's update needs besides its samples."""

    algo: AlgorithmConfig
    temperature: float
    grad_clip: float
    tracker_factory: TrackerFactory | None = None


@dataclass
class PolicyUpdate:
    """One policy's update of one step: `update_policy`'s averages and its tracker's metrics."""

    stats: dict[str, float]
    diagnostics: dict[str, float] = field(default_factory=dict)


class UpdateBackend(Protocol):
    """Runs each policy's update; the driver's policies hold the new weights when `update` returns."""

    def update(self, batches: dict[str, list[Sample]], seeds: dict[str, int]) -> dict[str, PolicyUpdate]:
        """Each policy's update, its minibatches shuffled by its seed (`update_seeds`)."""

    def pull_optimizer_state(self) -> None:
        """Bring optimizer and scheduler states into the driver's PolicyOptimizers (before a checkpoint)."""

    def tracker_states(self) -> dict[str, Any]:
        """Each policy's per-role gradient tracker state (policies without a tracker are left out)."""

    def load_tracker_states(self, states: dict[str, Any]) -> None:
        """Restore what `tracker_states` returned (on resume)."""

    def close(self) -> None: ...


def tracker_states(trackers: dict[str, Any]) -> dict[str, Any]:
    """The states of the policies' trackers (policies without one are left out)."""
    return {name: t.state_dict() for name, t in trackers.items() if t is not None}


def load_tracker_states(trackers: dict[str, Any], states: dict[str, Any]) -> None:
    """Load `tracker_states` output into the trackers that exist here."""
    for name, state in states.items():
        if trackers.get(name) is not None:
            trackers[name].load_state_dict(state)


def update_seeds(names: list[str], rng: random.Random) -> dict[str, int]:
    """One minibatch-shuffling seed per policy, drawn in a fixed order whatever runs the updates (the loop
    draws them before the pipelined schedule hands `rng` to the next rollout)."""
    return {name: rng.getrandbits(63) for name in names}


def run_update(
    state: PolicyOptimizer, samples: list[Sample], seed: int, settings: UpdateSettings, tracker: Any = None
) -> PolicyUpdate:
    """`update_policy` on one policy's samples with its own seeded shuffling RNG."""
    stats = update_policy(
        state, samples, settings.algo, settings.temperature, settings.grad_clip, random.Random(seed), tracker
    )
    return PolicyUpdate(stats, tracker.end_step() if tracker is not None else {})
