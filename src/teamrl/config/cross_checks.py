"""Checks that read across sections: run by RunConfig after every section has built (and checked) itself."""

from __future__ import annotations

from teamrl.config.checks import ConfigError, require
from teamrl.config.sections import AlgorithmConfig, RolloutConfig, TrainerConfig


def check_rollout_workers_engine(rollout: RolloutConfig, trainer: TrainerConfig) -> None:
    """rollout.engine: vllm samples in the training process, so Ray rollout workers cannot use it."""
    require(
        rollout.engine != "vllm" or not trainer.rollout_workers,
        "rollout.engine",
        rollout.engine,
        "builtin with trainer.rollout_workers > 0 (the vLLM engine samples in the training process; set "
        "trainer.rollout_workers=0)",
    )


def check_pipeline(trainer: TrainerConfig, algo: AlgorithmConfig) -> None:
    """A pipelined schedule that samples with stale weights needs the rollout correction that accounts for it."""
    if trainer.rollout_schedule != "pipelined" or trainer.rollout_staleness == 0:
        return
    require(
        algo.rollout_correction != "none",
        "algorithm.rollout_correction",
        algo.rollout_correction,
        "tis, mis, seq_tis or seq_mis with trainer.rollout_schedule: pipelined (its samples come from the "
        "weights one update behind the trainer's; the correction weights them by pi_prox / mu), or "
        "trainer.rollout_staleness=0",
    )


def check_sharding(trainer: TrainerConfig, algo: AlgorithmConfig) -> None:
    """Cross-section checks of trainer.shard: fsdp (every worker runs each forward with the others)."""
    if trainer.shard != "fsdp":
        return
    world = trainer.data_parallel
    if algo.minibatch_size % world:
        raise ConfigError(
            f"algorithm.minibatch_size = {algo.minibatch_size} does not divide among trainer.data_parallel = "
            f"{world} FSDP workers; set algorithm.minibatch_size to a multiple of {world} "
            f"(e.g. {algo.minibatch_size + world - algo.minibatch_size % world})"
        )
    if algo.micro_batch_tokens > 0:
        raise ConfigError(
            f"trainer.shard: fsdp cannot be combined with algorithm.micro_batch_tokens = "
            f"{algo.micro_batch_tokens}: FSDP workers must run the same forwards, and each "
            "worker's micro-batches depend on its own share; set algorithm.micro_batch_tokens=0 "
            "(sharding already bounds each worker's memory)"
        )
    if algo.coherence_damping > 0:
        raise ConfigError(
            "trainer.shard: fsdp cannot be combined with algorithm.coherence_damping: each worker "
            "holds only a shard of a role's gradient; set one of them off"
        )
