"""Checks that read across sections (or a whole section at once): run after every section is built."""

from __future__ import annotations

from teamrl.config.checks import ConfigError, require
from teamrl.config.sections import AlgorithmConfig, DiagnosticsConfig, TrainerConfig


def check_sharding(trainer: TrainerConfig, algo: AlgorithmConfig) -> None:
    """Cross-section checks of trainer.shard: fsdp (every worker runs each forward with the others)."""
    if trainer.shard != "fsdp":
        return
    world = trainer.data_parallel
    if algo.minibatch_size % world:
        raise ConfigError(
            f"algorithm.minibatch_size = {algo.minibatch_size} does not divide among trainer.data_parallel = "
            f"{world} FSDP workers; set algorithm.minibatch_size to a multiple of {world} "
            f"(e.g. {algo.minibatch_size + world - algo.minibatch_size % world})")
    if algo.micro_batch_tokens > 0:
        raise ConfigError(f"trainer.shard: fsdp cannot be combined with algorithm.micro_batch_tokens = "
                          f"{algo.micro_batch_tokens}: FSDP workers must run the same forwards, and each "
                          "worker's micro-batches depend on its own share; set algorithm.micro_batch_tokens=0 "
                          "(sharding already bounds each worker's memory)")
    if algo.coherence_damping > 0:
        raise ConfigError("trainer.shard: fsdp cannot be combined with algorithm.coherence_damping: each worker "
                          "holds only a shard of a role's gradient; set one of them off")


def check_mitigations(algo: AlgorithmConfig) -> None:
    require(algo.log_ratio_clamp > 0, "algorithm.log_ratio_clamp", algo.log_ratio_clamp,
             "> 0 (e.g. 20: ratios beyond exp(20) are treated as exp(20))")
    require(algo.kl_clamp > 0, "algorithm.kl_clamp", algo.kl_clamp, "> 0 (e.g. 10)")
    if algo.agentwise_norm and algo.grouping == "trajectory" and algo.trajectory_credit == "team":
        raise ConfigError("algorithm.agentwise_norm = true does nothing with grouping: trajectory and "
                          "trajectory_credit: team (every agent shares the episode's return); set "
                          "algorithm.trajectory_credit=per_agent or algorithm.grouping=tree, or "
                          "agentwise_norm=false")
    for role, coef in algo.kl_coef_by_role.items():
        require(isinstance(coef, (int, float)) and not isinstance(coef, bool) and coef >= 0,
                 f"algorithm.kl_coef_by_role.{role}", coef, "a number >= 0")
    require(0 <= algo.coherence_damping <= 1, "algorithm.coherence_damping", algo.coherence_damping,
             "0 <= lambda <= 1 (0 = off; at 1 a fully coherent role's update freezes)")
    require(0 <= algo.coherence_tau < 1, "algorithm.coherence_tau", algo.coherence_tau, "0 <= tau < 1")


def check_diagnostics(diag: DiagnosticsConfig) -> None:
    require(diag.level in ("none", "cheap", "full"), "diagnostics.level", diag.level, "none, cheap or full")
    require(diag.sketch_dim >= 16, "diagnostics.sketch_dim", diag.sketch_dim, ">= 16")
    require(diag.baseline_steps >= 1 and diag.window >= 1, "diagnostics.window", diag.window,
             ">= 1 (and baseline_steps >= 1)")
    for name in ("dominant_share", "drift_toward", "format_drop", "echo_cosine", "diversity_drop",
                 "diversity_floor", "collapse_drop", "stall_success"):
        value = getattr(diag, name)
        require(0 <= value <= 1, f"diagnostics.{name}", value, "a fraction between 0 and 1")
    require(diag.stall_adv >= 0, "diagnostics.stall_adv", diag.stall_adv, ">= 0 (a mean |advantage|)")
    require(diag.train_transcripts >= 0, "diagnostics.train_transcripts", diag.train_transcripts, ">= 0")
