"""benchmarks/scaling.py: phases, the dominant one and the cost per unit of work by hand, and one row
measured on a tiny budget."""

from __future__ import annotations

import argparse

import pytest

from benchmarks import scaling



def test_phase_seconds_by_hand():
    phases = scaling.phase_seconds(rollout_s=3.0, update_s=1.0, score_s=0.5, sandbox_s=0.2, wall_s=4.5,
                                   eval_per_step_s=0.25)
    assert phases == pytest.approx({"generate": 2.5, "score": 0.3, "sandbox": 0.2, "update": 1.0, "eval": 0.25,
                                    "other": 0.5})
    assert sum(phases.values()) == pytest.approx(4.5 + 0.25)
    with pytest.raises(ValueError, match="sandbox_s <= score_s <= rollout_s"):
        scaling.phase_seconds(rollout_s=1.0, update_s=1.0, score_s=0.1, sandbox_s=0.2, wall_s=2.0, eval_per_step_s=0)


def test_dominant_phase_and_its_share():
    assert scaling.dominant_phase({"generate": 3.0, "update": 1.0, "eval": 0.0, "score": 0.0, "sandbox": 0.0,
                                   "other": 0.0}) == ("generate", 0.75)
    assert scaling.dominant_phase({"update": 2.0, "eval": 2.0})[0] == "update"  # a tie: the earlier phase
    with pytest.raises(ValueError, match="no time"):
        scaling.dominant_phase({"update": 0.0})


def _row(cpu_s, tokens, params):
    return scaling.Row("m", params, 1, 2, step_s=1.0, cpu_s=cpu_s, tokens=tokens, samples=4, phases={})


def test_relative_cost_is_cpu_seconds_per_token_parameter():
    rows = [_row(2.0, 100, 10), _row(4.0, 200, 10), _row(8.0, 100, 20), _row(3.0, 100, 10)]
    # costs: 2/1000, 4/2000 (linear in tokens), 8/2000 (twice the cost per unit), 3/1000
    assert scaling.relative_cost(rows) == pytest.approx([1.0, 1.0, 2.0, 1.5])


def test_measure_row_on_a_tiny_budget(tmp_path, small_model_dir):
    args = argparse.Namespace(warmup_steps=1, steps=1, eval_instances=2)
    row = scaling.measure_row("tiny", small_model_dir, instances=1, k=2, args=args, runs=tmp_path)
    assert row.params > 0 and row.tokens > 0 and row.cpu_s > 0
    assert row.samples >= 2 * 2  # two agents (tool, plan) x K=2 in the first turn alone
    assert set(row.phases) == set(scaling.PHASES) and row.phases["eval"] > 0
    assert sum(row.phases.values()) == pytest.approx(row.step_s, rel=0.05)  # one timed step: its own phases
    table = scaling.format_table([row])
    assert table.count("\n") == 2 and "| tiny |" in table and table.rstrip().endswith("| 1.00 |")
