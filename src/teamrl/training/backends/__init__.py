"""Where the per-policy updates of a training step run: in this process, or on Ray actors.

The loop samples, scores and assigns advantages in the driver either way, then hands each policy's
samples to a backend. Both backends call the same `update_policy` with the same per-policy
shuffling seeds (drawn here, from the loop's RNG, in policy order), so for one seed they produce
the same weights and metrics; the Ray backend merely runs the policies' updates in parallel and
copies the new weights back into the driver's policies, which sample the next step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from teamrl.config import AlgorithmConfig, ConfigError, TrainerConfig
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

    def update(self, batches: dict[str, list[Sample]], rng: random.Random) -> dict[str, PolicyUpdate]: ...

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
    """One minibatch-shuffling seed per policy, drawn in a fixed order whatever runs the updates."""
    return {name: rng.getrandbits(63) for name in names}


def run_update(state: PolicyOptimizer, samples: list[Sample], seed: int,
               settings: UpdateSettings, tracker: Any = None) -> PolicyUpdate:
    """`update_policy` on one policy's samples with its own seeded shuffling RNG."""
    stats = update_policy(state, samples, settings.algo, settings.temperature, settings.grad_clip,
                          random.Random(seed), tracker)
    return PolicyUpdate(stats, tracker.end_step() if tracker is not None else {})


def make_backend(trainer: TrainerConfig, optimizers: dict[str, PolicyOptimizer], settings: UpdateSettings) -> UpdateBackend:
    """The backend `trainer.backend` names (local or ray), holding `optimizers`."""
    if trainer.data_parallel > 1 and settings.algo.coherence_damping > 0:
        raise ConfigError("trainer.data_parallel > 1 cannot be combined with algorithm.coherence_damping: "
                          "each worker sees only its share of a role's gradient; set one of them off")
    if trainer.backend == "local":
        if trainer.data_parallel > 1:
            raise ConfigError("trainer.data_parallel > 1 needs trainer.backend: ray (the workers of a "
                              "policy are Ray actors)")
        from teamrl.training.backends.local import LocalBackend

        return LocalBackend(optimizers, settings)
    if trainer.backend == "ray":
        from teamrl.training.backends.ray_backend import RayBackend

        return RayBackend(optimizers, settings, trainer)
    raise ConfigError(f"trainer.backend = {trainer.backend!r} is invalid: expected local or ray")
