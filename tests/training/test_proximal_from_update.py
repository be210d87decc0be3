"""pi_prox from the update's own forward: when the update is one optimizer step (one epoch, one minibatch),
the log-probs its forwards compute before that step are pi_prox, so the extra no-grad forward is skipped
and the update is bit for bit the one with the extra forward."""

from __future__ import annotations

import copy
import random
from dataclasses import replace

import pytest
import torch

from teamrl.config import AlgorithmConfig
from teamrl.training import update as update_module
from teamrl.training.update import update_policy
from update_fixtures import lora_optimizers, policy_optimizer, synthetic_samples

ONE_STEP = AlgorithmConfig(minibatch_size=64, ppo_epochs=1, micro_batch_tokens=40, rollout_correction="tis")


@pytest.fixture
def forwards(monkeypatch):
    """Counts the extra pi_prox forwards the update makes."""
    calls = []
    real = update_module.proximal_logprobs

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(update_module, "proximal_logprobs", counted)
    return calls


def _update(algo, reuse, make=lambda: policy_optimizer(), samples=None):
    state = make()
    stats = update_policy(state, copy.deepcopy(samples or synthetic_samples()), algo, 1.0, 1.0, random.Random(0),
                          reuse_forward=reuse)
    return stats, [p.detach().clone() for p in state.policy.model.parameters()]


@pytest.mark.parametrize("algo", [
    ONE_STEP,
    replace(ONE_STEP, micro_batch_tokens=0),
    replace(ONE_STEP, rollout_correction="seq_mis", role_balanced=True),  # the batch split by role
    replace(ONE_STEP, autocast="bf16", clip_low=0.1),
], ids=["micro-batches", "one-call", "by-role", "bf16"])
def test_first_forward_equals_the_extra_forward_bit_for_bit(algo, forwards):
    extra, extra_weights = _update(algo, reuse=False)
    assert len(forwards) == 1
    reused, reused_weights = _update(algo, reuse=True)
    assert len(forwards) == 1  # the second update made no extra forward
    assert all(torch.equal(a, b) for a, b in zip(extra_weights, reused_weights))
    assert {k: v for k, v in extra.items() if k != "peak_memory_mb"} == {
        k: v for k, v in reused.items() if k != "peak_memory_mb"}
    # the behaviour log-probs sit away from the model's: the correction did something to compare
    assert extra["rollout_correction/truncated_frac"] + extra["rollout_correction/masked_frac"] > 0
    assert extra["rollout_correction/is_weight_mean"] != 1.0


def test_lora_adapters_take_pi_prox_from_their_first_forward(forwards):
    def make():
        return lora_optimizers(("plan",), with_reference=False)["plan"]

    samples = synthetic_samples("plan")
    extra, extra_weights = _update(ONE_STEP, False, make, samples)
    reused, reused_weights = _update(ONE_STEP, True, make, samples)
    assert len(forwards) == 1
    assert all(torch.equal(a, b) for a, b in zip(extra_weights, reused_weights))
    assert extra["loss"] == reused["loss"] and extra["rollout_correction/is_weight_mean"] == reused[
        "rollout_correction/is_weight_mean"]


@pytest.mark.parametrize("change", [{"ppo_epochs": 2}, {"minibatch_size": 4}], ids=["two-epochs", "minibatches"])
def test_several_optimizer_steps_keep_the_extra_forward(change, forwards):
    """A later minibatch or epoch runs on updated weights: its forward is no longer pi_prox."""
    _update(replace(ONE_STEP, **change), reuse=True)
    assert len(forwards) == 1


def test_dropout_keeps_the_extra_forward(forwards):
    """In training mode dropout changes the forward; pi_prox is the evaluation-mode forward."""
    def make():
        state = policy_optimizer()
        state.policy.model.config.attention_dropout = 0.1
        return state

    _update(ONE_STEP, reuse=True, make=make)
    assert len(forwards) == 1


def test_no_correction_makes_no_forward(forwards):
    stats, _ = _update(replace(ONE_STEP, rollout_correction="none"), reuse=True)
    assert not forwards and not any(k.startswith("rollout_correction/") for k in stats)
