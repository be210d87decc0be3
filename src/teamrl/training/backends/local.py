"""The single-process backend: each policy's update runs here, one after another."""

from __future__ import annotations

from teamrl.rollout.tree import Sample
from teamrl.training.backends.base import (
    PolicyUpdate,
    UpdateSettings,
    load_tracker_states,
    run_update,
    tracker_states,
)
from teamrl.training.update import PolicyOptimizer


class LocalBackend:
    """Updates the driver's own PolicyOptimizers in place."""

    def __init__(self, optimizers: dict[str, PolicyOptimizer], settings: UpdateSettings) -> None:
        self.optimizers, self.settings = optimizers, settings
        factory = settings.tracker_factory
        self.trackers = {name: factory(name, opt) if factory else None for name, opt in optimizers.items()}

    def update(self, batches: dict[str, list[Sample]], seeds: dict[str, int]) -> dict[str, PolicyUpdate]:
        return {
            name: run_update(opt, batches[name], seeds[name], self.settings, self.trackers[name])
            for name, opt in self.optimizers.items()
            if batches.get(name)
        }

    def pull_optimizer_state(self) -> None:
        """Nothing to do: the optimizers live in this process."""

    def tracker_states(self) -> dict[str, dict]:
        return tracker_states(self.trackers)

    def load_tracker_states(self, states: dict[str, dict]) -> None:
        load_tracker_states(self.trackers, states)

    def close(self) -> None:
        """Nothing to release."""
