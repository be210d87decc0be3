"""Where the per-policy updates of a training step run: in this process, or on Ray actors.

The loop samples, scores and assigns advantages in the driver either way, then hands each policy's
samples to a backend. Both backends call the same `update_policy` with the same per-policy
shuffling seeds (drawn here, from the loop's RNG, in policy order), so for one seed they produce
the same weights and metrics; the Ray backend merely runs the policies' updates in parallel and
copies the new weights back into the driver's policies, which sample the next step.
"""

from __future__ import annotations

from teamrl.config import ConfigError, TrainerConfig
from teamrl.training.backends.base import UpdateBackend, UpdateSettings
from teamrl.training.update import PolicyOptimizer


def make_backend(
    trainer: TrainerConfig, optimizers: dict[str, PolicyOptimizer], settings: UpdateSettings
) -> UpdateBackend:
    """The backend `trainer.backend` names (local or ray), holding `optimizers`."""
    if trainer.data_parallel > 1 and settings.algo.coherence_damping > 0:
        raise ConfigError(
            "trainer.data_parallel > 1 cannot be combined with algorithm.coherence_damping: "
            "each worker sees only its share of a role's gradient; set one of them off"
        )
    if trainer.backend == "local":
        if trainer.data_parallel > 1:
            raise ConfigError(
                "trainer.data_parallel > 1 needs trainer.backend: ray (the workers of a policy are Ray actors)"
            )
        from teamrl.training.backends.local import LocalBackend

        return LocalBackend(optimizers, settings)
    if trainer.backend == "ray":
        from teamrl.training.backends.ray_backend import RayBackend

        return RayBackend(optimizers, settings, trainer)
    raise ConfigError(f"trainer.backend = {trainer.backend!r} is invalid: expected local or ray")
