"""A tiny-model training run sampling in bf16 with a rollout correction: it trains, logs the correction's
metrics, and records its arithmetic."""

from __future__ import annotations

import json
import logging

import pytest

from teamrl.config import ConfigError, load_config
from teamrl.training.loop import train


@pytest.fixture
def toy_task(monkeypatch):
    from teamrl.config import tasks as registry
    from toy import ToyWorkflow

    monkeypatch.setattr(registry, "TASKS", dict(registry.TASKS))
    registry.register_task("toy", workflow=ToyWorkflow)


def _run(tmp_path, random_model_dir, name: str, *overrides: str):
    config = load_config(None, ["task.name=toy", "workflow.max_turns=2", "rollout.max_new_tokens=6",
                                "train.batch_size=2", "train.eval_instances=2", "algorithm.k=4", f"run_name={name}",
                                "train.steps=2", "train.eval_every=0", "train.threads=1",
                                f"policy.model={random_model_dir}", f"output_dir={tmp_path}", *overrides])
    return train(config, progress=False)


def test_a_bf16_sampler_with_tis_trains_and_logs_the_correction(toy_task, tmp_path, random_model_dir, caplog):
    with caplog.at_level(logging.INFO, logger="teamrl"):
        run = _run(tmp_path, random_model_dir, "bf16", "rollout.sampler_dtype=bfloat16",
                   "algorithm.rollout_correction=tis")
    steps = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "train/success" in r]
    assert len(steps) == 2
    means = [r["rollout_correction/shared/is_weight_mean"] for r in steps]
    peaks = [r["rollout_correction/shared/is_weight_max"] for r in steps]
    # pi_prox (fp32) / mu (bf16): near 1 on average, but its largest token weight is above the float32 sampler's
    # 1 + 2e-5 (tests/training/test_update_rollout_correction.py); measured 1.0009-1.0016 here
    assert all(abs(m - 1) < 0.01 for m in means)
    assert all(1 + 1e-4 < p < 1.1 for p in peaks)
    record = json.loads((run / "arithmetic.json").read_text())
    assert record["sampler_dtype_resolved"] == "bfloat16"
    assert "training samples in bfloat16" in caplog.text
    assert "training samples in bfloat16" in (run / "train.log").read_text()
    assert "rollout_correction: none" not in caplog.text


def test_a_bf16_sampler_without_a_correction_is_warned(toy_task, tmp_path, random_model_dir, caplog):
    with caplog.at_level(logging.INFO, logger="teamrl"):
        _run(tmp_path, random_model_dir, "bf16-plain", "rollout.sampler_dtype=bfloat16", "train.steps=1")
    assert "algorithm.rollout_correction: tis" in caplog.text


def test_the_sampler_dtype_is_checked():
    with pytest.raises(ConfigError, match="sampler_dtype = 'fp8' is invalid: expected float32, bfloat16 or auto"):
        load_config(None, ["rollout.sampler_dtype=fp8"])
