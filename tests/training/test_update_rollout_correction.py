"""algorithm.rollout_correction in the update and in a training run: pi_prox is the trainer's forward before
the first optimizer step, the weights pi_prox / mu reach the loss, and the metrics are logged per policy."""

from __future__ import annotations

import copy
import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from teamrl.config import AlgorithmConfig, load_config
from teamrl.rollout import builtin_engine as builtin
from teamrl.rollout.sampler import serve
from teamrl.training import loop as loop_module
from teamrl.training.loop import train
from teamrl.training.proximal import proximal_logprobs
from teamrl.training.update import update_policy
from update_fixtures import policy_optimizer, synthetic_samples

# Several minibatches and two epochs: optimizer steps happen between the batch's forwards, so pi_prox
# taken after any of them would differ from the sampler's log-probs below.
ALGO = AlgorithmConfig(minibatch_size=4, ppo_epochs=2, micro_batch_tokens=40, clip_low=0.2, clip_high=0.28)


def _exact_samples(state) -> list:
    """Synthetic samples whose behaviour log-probs are exactly the trainer's (mu == pi_prox)."""
    samples = synthetic_samples()
    prox = proximal_logprobs(state.policy, samples, ALGO, 1.0)
    for s in samples:
        s.generation.logprobs = prox.logprobs[id(s)].tolist()
    return samples


def _update(mode: str, samples: list, shift=None) -> tuple[dict[str, float], list[torch.Tensor]]:
    state = policy_optimizer()
    samples = copy.deepcopy(samples)
    if shift is not None:
        for s in samples:
            s.generation.logprobs = [lp - shift(t) for t, lp in enumerate(s.generation.logprobs)]
    stats = update_policy(state, samples, replace(ALGO, rollout_correction=mode), 1.0, 1.0, random.Random(0))
    return stats, [p.detach().clone() for p in state.policy.model.parameters()]


@pytest.mark.parametrize("mode", ["tis", "mis", "seq_tis", "seq_mis"])
def test_an_exact_sampler_gives_the_uncorrected_update_bit_for_bit(mode):
    samples = _exact_samples(policy_optimizer())
    plain, plain_weights = _update("none", samples)
    corrected, corrected_weights = _update(mode, samples)
    assert all(torch.equal(a, b) for a, b in zip(plain_weights, corrected_weights))
    assert corrected["loss"] == plain["loss"] and corrected["grad_norm"] == plain["grad_norm"]
    assert {k: corrected[k] for k in corrected if k.startswith("rollout_correction/")} == {
        "rollout_correction/is_weight_mean": 1.0, "rollout_correction/is_weight_max": 1.0,
        "rollout_correction/truncated_frac": 0.0, "rollout_correction/masked_frac": 0.0}
    assert not any(k.startswith("rollout_correction/") for k in plain)


def _ln3_on_even_tokens(t: int) -> float:
    """mu = pi_prox - ln 3 on even positions (ratio 3 > C = 2), pi_prox - ln 0.8 on odd ones (ratio 0.8)."""
    return math.log(3.0) if t % 2 == 0 else math.log(0.8)


def test_perturbed_behaviour_logprobs_move_the_weights_as_computed_by_hand():
    samples = _exact_samples(policy_optimizer())
    lengths = [len(s.generation.response_ids) for s in samples]
    even = sum((n + 1) // 2 for n in lengths)
    n = sum(lengths)
    _, plain_weights = _update("none", samples)

    tis, tis_weights = _update("tis", samples, _ln3_on_even_tokens)
    # even tokens: min(3, 2) = 2, truncated; odd tokens: 0.8
    assert tis["rollout_correction/truncated_frac"] == pytest.approx(even / n)
    assert tis["rollout_correction/is_weight_mean"] == pytest.approx((2 * even + 0.8 * (n - even)) / n, rel=1e-6)
    assert tis["rollout_correction/is_weight_max"] == pytest.approx(2.0)
    assert tis["rollout_correction/masked_frac"] == 0.0

    mis, mis_weights = _update("mis", samples, _ln3_on_even_tokens)
    # even tokens dropped (3 > 2), odd tokens keep 0.8
    assert mis["rollout_correction/masked_frac"] == pytest.approx(even / n)
    assert mis["rollout_correction/is_weight_mean"] == pytest.approx(0.8 * (n - even) / n, rel=1e-6)
    assert mis["rollout_correction/is_weight_max"] == pytest.approx(0.8, rel=1e-6)

    # The weights reach the loss: each correction trains to other weights than no correction.
    for weights in (tis_weights, mis_weights):
        assert not all(torch.equal(a, b) for a, b in zip(plain_weights, weights))


def test_a_uniform_weight_inside_the_cap_acts_as_a_scaled_advantage():
    # mu = pi_prox - ln 1.5 everywhere: tis weights every token by 1.5 (inside the cap), the same as a
    # 1.5x larger advantage. The sequence variant gives the same weights (the geometric mean of 1.5s).
    samples = _exact_samples(policy_optimizer())
    token, token_weights = _update("tis", samples, lambda t: math.log(1.5))
    seq, seq_weights = _update("seq_tis", samples, lambda t: math.log(1.5))
    for stats in (token, seq):
        assert stats["rollout_correction/is_weight_mean"] == pytest.approx(1.5, rel=1e-6)
        assert stats["rollout_correction/truncated_frac"] == 0.0
    scaled = copy.deepcopy(samples)
    for s in scaled:
        s.advantage *= 1.5
    _, scaled_weights = _update("none", scaled)
    for a, b, c in zip(token_weights, seq_weights, scaled_weights):
        assert torch.allclose(a, c, rtol=0, atol=1e-6) and torch.allclose(b, c, rtol=0, atol=1e-6)


# --- a training run on the tiny random model, sampled by a served engine that reports shifted log-probs ---


class ShiftedSampler:
    """The built-in engine (float32, the trainer's own weights) reporting log-probs minus `shift`."""

    def __init__(self, shift: float) -> None:
        self.shift = shift

    def sample(self, policy, prompts, num_samples, params, generator):
        groups = builtin.sample(policy, prompts, num_samples, params, generator)
        for group in groups:
            for g in group:
                g.logprobs = [lp - self.shift for lp in g.logprobs]
        return groups

    def close(self) -> None:
        pass


@pytest.fixture
def served_toy(tmp_path, random_model_dir, monkeypatch):
    """run(mode, shift, name): a 3-step toy-team run whose policies a ShiftedSampler(shift) serves."""
    from teamrl.config import tasks as registry
    from toy import ToyWorkflow

    monkeypatch.setattr(registry, "TASKS", dict(registry.TASKS))
    registry.register_task("toy", workflow=ToyWorkflow)
    built, shift_now = loop_module.build_policies, [0.0]

    def served(*args, **kwargs):  # a served engine also makes the loop log rollout/logprob_gap
        policies, mapping = built(*args, **kwargs)
        for policy in policies.values():
            serve(policy, ShiftedSampler(shift_now[0]))
        return policies, mapping

    monkeypatch.setattr(loop_module, "build_policies", served)

    def run(mode: str, shift: float, name: str) -> Path:
        shift_now[0] = shift
        config = load_config(None, ["task.name=toy", "workflow.max_turns=2", "rollout.max_new_tokens=6",
                                    "train.batch_size=2", "train.eval_instances=2", "algorithm.k=4",
                                    f"run_name={name}", "train.steps=3", "train.eval_every=0", "train.threads=1",
                                    "policy.lr=1e-2", "algorithm.drop_zero_signal=false",
                                    f"algorithm.rollout_correction={mode}", f"policy.model={random_model_dir}",
                                    f"output_dir={tmp_path}"])
        return train(config, progress=False)

    return run


def _steps(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "train/success" in r]


def _final(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints" / "final" / "shared" / "model.safetensors"))


GAP = 1e-5
"""Bound on |sampler - trainer| log-prob per token of the built-in float32 engine on the tiny model: the
sampler decodes with a KV cache, the trainer scores the whole response in one forward, so the sums run in
another order. Measured: mean 1.3e-7 to 1.7e-7, max 4.8e-7 to 9.5e-7 per step (one or two float32 rounding
steps of a log-prob near -4); the bound leaves a 10x margin for other thread counts and CPUs."""


def test_an_exact_float32_sampler_trains_as_without_correction(served_toy, random_model_dir):
    plain = served_toy("none", 0.0, "none")
    first = served_toy("tis", 0.0, "tis")
    again = served_toy("tis", 0.0, "tis-again")
    rows = _steps(first)
    for row in rows:
        assert row["rollout/logprob_gap_max/shared"] < GAP
        assert abs(row["rollout_correction/shared/is_weight_mean"] - 1) < GAP
        assert abs(row["rollout_correction/shared/is_weight_max"] - 1) < 2 * GAP  # e^x - 1 < 2x for small x
        assert row["rollout_correction/shared/truncated_frac"] == 0.0
        assert row["rollout_correction/shared/masked_frac"] == 0.0
    assert not any(k.startswith("rollout_correction/") for r in _steps(plain) for k in r)
    # Seeded: the same run twice gives the same weights and metrics.
    assert all(torch.equal(a, b) for a, b in zip(_final(first).values(), _final(again).values()))
    measured = ("time/", "policy/shared/peak_memory_mb")  # of the machine, not of the arithmetic

    def kept(run_rows: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if not k.startswith(measured)} for r in run_rows]

    assert kept(rows) == kept(_steps(again))
    # Against no correction: the ratio's base (pi_prox instead of mu) and the weights differ by the gap,
    # so the weights agree to a small fraction of how far the update moved them (measured: at most 9.5e-8
    # apart after 3 steps that moved a weight by up to 1.2e-2).
    initial = load_file(str(random_model_dir / "model.safetensors"))
    tis, none = _final(first), _final(plain)
    moved = max(float((none[k] - initial[k]).abs().max()) for k in none)
    apart = max(float((tis[k] - none[k]).abs().max()) for k in none)
    assert moved > 1e-3
    assert apart < 1e-3 * moved


@pytest.mark.parametrize("mode, shift, expected", [
    ("tis", math.log(3.0), {"is_weight_mean": 2.0, "is_weight_max": 2.0, "truncated_frac": 1.0, "masked_frac": 0.0}),
    ("mis", math.log(3.0), {"is_weight_mean": 0.0, "is_weight_max": 0.0, "truncated_frac": 0.0, "masked_frac": 1.0}),
    ("tis", math.log(1.5), {"is_weight_mean": 1.5, "is_weight_max": 1.5, "truncated_frac": 0.0, "masked_frac": 0.0}),
    ("seq_mis", -math.log(1.5), {"is_weight_mean": 1 / 1.5, "is_weight_max": 1 / 1.5, "truncated_frac": 0.0,
                                 "masked_frac": 0.0}),
])
def test_a_sampler_reporting_shifted_logprobs_moves_the_logged_metrics(served_toy, mode, shift, expected):
    # The sampler reports mu = its log-prob - shift, so pi_prox / mu = e^shift on every token, up to the gap.
    rows = _steps(served_toy(mode, shift, mode))
    assert rows
    for row in rows:
        assert row["rollout/logprob_gap/shared"] == pytest.approx(abs(shift), abs=GAP)
        logged = {key: row[f"rollout_correction/shared/{key}"] for key in expected}
        assert logged == pytest.approx(expected, abs=4 * GAP)
