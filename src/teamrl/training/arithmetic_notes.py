"""What arithmetic a run resolved to (policy.cpu_linear, rollout.sampler_dtype), said once at its start.

Where a setting consulted this host's arithmetic probe (`cpu_linear: measured`, `sampler_dtype: auto`), the
probe's figures and choices go to train.log; the resolved values and the figures are written to the run's
`arithmetic.json`. A bf16 sampler without a rollout correction is warned: the update would then treat the bf16
sampler's log-probs as the fp32 policy's own.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from teamrl.config import RunConfig
from teamrl.policies.arithmetic_probe import host_probe, resolve_sampler_dtype


def arithmetic_record(config: RunConfig, policy_names: list[str], onednn_layers: int) -> dict[str, Any]:
    """Log the run's arithmetic (and the probe's figures where a setting read them); the record for the run
    directory's arithmetic.json."""
    log = logging.getLogger("teamrl")
    settings = sorted({config.policy_config(name).cpu_linear for name in policy_names})
    sampler = resolve_sampler_dtype(config.rollout.sampler_dtype)
    record: dict[str, Any] = {
        "cpu_linear": settings,
        "onednn_layers": onednn_layers,
        "sampler_dtype": config.rollout.sampler_dtype,
        "sampler_dtype_resolved": sampler,
    }
    if "measured" in settings or config.rollout.sampler_dtype == "auto":
        probe = host_probe()
        log.info(probe.summary())
        record["probe"] = asdict(probe)
    log.info(
        "arithmetic: %d linear layer(s) on oneDNN (policy.cpu_linear %s); training samples in %s",
        onednn_layers,
        "/".join(settings),
        sampler,
    )
    if sampler == "bfloat16" and config.algorithm.rollout_correction == "none":
        log.warning(
            "rollout.sampler_dtype resolved to bfloat16 with algorithm.rollout_correction: none: the update "
            "takes the bf16 sampler's log-probs as the fp32 policy's own; set "
            "algorithm.rollout_correction: tis to weight each token by pi_prox / mu "
            "(docs/performance/arithmetic.md)"
        )
    return record
