"""Per-role rollout statistics, duplicated-agent diversity, drift and training transcripts, by hand."""

from __future__ import annotations

import pytest
import torch

from teamrl.diagnostics.diversity import distinct_ratio, duplicated_diversity, jaccard_distance, mean_pairwise_distance
from teamrl.diagnostics.drift import Baselines, Windows
from teamrl.diagnostics.rollout import format_ok, rollout_diagnostics
from teamrl.diagnostics.sketch import GradientSketch, cosine, mean_pairwise_cosine
from teamrl.diagnostics.transcripts import training_transcripts
from teamrl.rollout.tree import Episode
from diag_helpers import sample


def test_role_and_agent_stats_by_hand():
    samples = [sample("v1", "voter", "abcd", reward=1.0, advantage=1.0, terms={"format_ok": 1, "correct": 1}),
               sample("v1", "voter", "ab", reward=0.0, advantage=-1.0, terms={"format_ok": 0, "correct": 0}),
               sample("v2", "voter", "abcdef", reward=1.0, advantage=0.5, terms={"format_ok": 1, "correct": 1}),
               sample("agg", "aggregator", "x", reward=2.0, advantage=0.0, terms={"any_correct": 1})]
    m = rollout_diagnostics(samples)
    assert m["diag/role/voter/reward_mean"] == pytest.approx(2 / 3)
    assert m["diag/role/voter/reward_std"] == pytest.approx((2 / 9) ** 0.5)  # population std of 1, 0, 1
    assert m["diag/role/voter/adv_abs"] == pytest.approx(2.5 / 3)
    assert m["diag/role/voter/response_len"] == pytest.approx(4.0)
    assert m["diag/role/voter/format_ok"] == pytest.approx(2 / 3)
    assert m["diag/role/voter/correct"] == pytest.approx(2 / 3)
    assert m["diag/agent/v1/response_len"] == pytest.approx(3.0)
    assert m["diag/agent/v2/correct"] == 1.0
    assert m["diag/role/aggregator/any_correct"] == 1.0
    assert "diag/role/aggregator/format_ok" not in m  # no format term recorded: nothing reported
    assert "diag/agent/agg/reward_mean" not in m  # a lone agent's stats are its role's


def test_format_falls_back_to_the_sign_of_the_format_term():
    assert format_ok(sample("a", "r", terms={"format": 0.1})) == 1.0
    assert format_ok(sample("a", "r", terms={"format": -0.1})) == 0.0
    assert format_ok(sample("a", "r", terms={"format_ok": 0, "format": 0.1})) == 0.0  # format_ok wins
    assert format_ok(sample("a", "r")) is None


def test_a_well_formed_answer_without_a_format_bonus_counts_as_well_formed():
    # Split-Calc gives a parsed answer no bonus (format 0) and a malformed one the penalty.
    from teamrl.tasks.split_calc import SplitCalcConfig, analyst_terms, calculator_terms

    config, item = SplitCalcConfig(), ("sum", 3, 4)
    right, wrong, broken = analyst_terms(config, item, "x+y"), analyst_terms(config, item, "x*y"), analyst_terms(config, item, "x+")
    assert [format_ok(sample("a", "analyst", terms=t)) for t in (right, wrong, broken)] == [1.0, 1.0, 0.0]
    assert format_ok(sample("c", "calculator", terms=calculator_terms(config, item, "x+y", 7))) == 1.0
    assert format_ok(sample("c", "calculator", terms=calculator_terms(config, item, "x+y", None))) == 0.0


def test_text_diversity_by_hand():
    assert distinct_ratio(["7", " 7 ", "8"]) == pytest.approx(0.5)
    assert distinct_ratio(["a", "A"]) == 0.0
    assert jaccard_distance("the answer is 7", "the answer is 8") == pytest.approx(1 - 3 / 5)
    assert mean_pairwise_distance(["a b", "a b", "c"]) == pytest.approx((0 + 1 + 1) / 3)
    with pytest.raises(ValueError, match="at least two"):
        distinct_ratio(["only"])


def test_duplicated_diversity_compares_committed_outputs_per_instance_turn():
    samples = [sample("v1", "voter", "up up", episode=0), sample("v2", "voter", "up up", episode=0),
               sample("v1", "voter", "left", episode=1), sample("v2", "voter", "right", episode=1),
               sample("v2", "voter", "ignored", episode=1, committed=False),
               sample("agg", "aggregator", "v1", episode=0)]
    diversity = duplicated_diversity(samples)
    assert set(diversity) == {"voter"}
    distinct, distance = diversity["voter"]
    assert distinct == pytest.approx((0 + 1) / 2)
    assert distance == pytest.approx((0 + 1) / 2)


def test_baseline_drift_and_windows():
    base = Baselines(2)
    for value in (10.0, 12.0, 20.0):
        base.observe({"diag/role/plan/response_len": value, "diag/role/plan/format_ok": 1.0})
    assert base.get("diag/role/plan/response_len") == 11.0
    drift = base.drift({"diag/role/plan/response_len": 20.0, "diag/role/plan/format_ok": 0.5, "other": 1.0})
    assert drift == {"diag/role/plan/response_len_drift": 9.0, "diag/role/plan/format_ok_drift": -0.5}
    window = Windows(2)
    window.observe({"k": 1.0})
    assert window.mean("k") is None  # not enough values yet
    window.observe({"k": 3.0})
    window.observe({"k": 5.0})
    assert window.mean("k") == 4.0


def test_exact_sketch_is_the_flattened_gradient_and_count_sketch_is_linear():
    params = [torch.nn.Parameter(torch.zeros(3, 4)), torch.nn.Parameter(torch.zeros(5))]
    exact = GradientSketch(params, dim=8, exact_max_params=100)
    params[0].grad = torch.arange(12.0).reshape(3, 4)
    assert exact.exact and torch.equal(exact(), torch.cat([torch.arange(12.0), torch.zeros(5)]))
    sketch = GradientSketch(params, dim=8, exact_max_params=0, seed=3)
    a = sketch()
    params[1].grad = torch.ones(5)
    b = sketch()
    params[0].grad = None
    c = sketch()
    torch.testing.assert_close(b, a + c)  # linear: sketch(x + y) = sketch(x) + sketch(y)
    assert c.abs().sum() == pytest.approx(5.0)  # each coordinate lands in one bucket with sign +-1


def test_count_sketch_preserves_cosines_of_large_vectors():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(200_000, generator=gen)
    y = 0.6 * x + 0.8 * torch.randn(200_000, generator=gen)
    p = [torch.nn.Parameter(torch.zeros(200_000))]
    sketch = GradientSketch(p, dim=4096, exact_max_params=1000)
    p[0].grad = x
    sx = sketch()
    p[0].grad = y
    sy = sketch()
    assert cosine(sx, sy) == pytest.approx(cosine(x, y), abs=0.05)
    assert mean_pairwise_cosine([sx]) is None
    # fp32 dot products over 200k entries: the summation order (which differs by CPU) moves the 7th digit
    assert mean_pairwise_cosine([x, x, -x]) == pytest.approx((1 - 1 - 1) / 3, abs=1e-5)
    # an agent without gradient has no direction: left out, not counted as cosine 0
    assert mean_pairwise_cosine([x, torch.zeros_like(x), x]) == pytest.approx(1.0, abs=1e-5)
    assert mean_pairwise_cosine([x, torch.zeros_like(x)]) is None


def test_training_transcripts_carry_the_committed_candidates_advantage():
    samples = [sample("tool", "tool", "a", reward=1.0, advantage=0.8, committed=True),
               sample("tool", "tool", "b", reward=0.0, advantage=-0.8, committed=False),
               sample("plan", "plan", "c", reward=0.5, advantage=0.0, turn=0)]
    episode = Episode(0, None, turns=1, transcript=[
        {"turn": 0, "agent": "tool", "text": "a", "reward": 1.0, "terms": {}},
        {"turn": 0, "agent": "plan", "text": "c", "reward": 0.5, "terms": {}}])
    out = training_transcripts(samples, [episode, episode], count=1)
    assert len(out) == 1
    tool, plan = out[0]["turns"]
    assert (tool["advantage"], tool["candidates"], tool["role"]) == (0.8, 2, "tool")
    assert (plan["advantage"], plan["candidates"]) == (0.0, 1)
