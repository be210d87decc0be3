"""The power plan: seeds from a measured per-seed spread, against hand-computed half-widths and costs."""

import math

import pytest

from teamrl.study import power_plan
from teamrl.study.power_plan import half_width, plan_table, seeds_needed


def _results(diffs_per_row: dict[str, list[float]], seconds: dict[str, float], test_instances: int = 64) -> dict:
    records = []
    for row, values in diffs_per_row.items():
        for seed, value in enumerate(values):
            records.append({"row": row, "seed": seed, "test_success": value, "seconds": seconds[row]})
    seeds = list(range(len(next(iter(diffs_per_row.values())))))
    return {"study": "demo", "protocol": {"seeds": seeds, "test_instances": test_instances, "test_samples": 1},
            "rows": list(diffs_per_row), "results": records}


def test_seeds_needed_is_the_first_n_whose_t_half_width_is_under_the_target():
    # S = 5 points: n = 6 gives 2.571 x 5 / sqrt(6) = 5.25 (not under 5), n = 7 gives 2.447 x 5 / sqrt(7) = 4.62.
    assert half_width(0.05**2, 6) == pytest.approx(2.571 * 0.05 / math.sqrt(6))
    assert seeds_needed(0.05**2) == 7
    assert seeds_needed(0.05**2, cap=6) is None
    assert seeds_needed(0.001**2) == 3  # never fewer than 3


def test_a_table_plan_sizes_the_rows_of_undecided_claims_and_prices_them():
    # shared - trajectory: +0.04, -0.02, +0.01 -> mean +0.01, S = 0.030, interval spans 0: undecided.
    # shared - team: +0.30, +0.32, +0.28 -> decided; team keeps its 3 seeds.
    results = _results(
        {"team": [0.10, 0.10, 0.10], "shared": [0.40, 0.42, 0.38], "trajectory": [0.36, 0.44, 0.37]},
        {"team": 100.0, "shared": 300.0, "trajectory": 600.0},
    )
    plan = plan_table(results, instances=64, episode_s=1.0, typical=0.05)
    by_name = {p.claim.name: p for p in plan.claims}
    assert by_name["shared - team"].claim.decided
    undecided = by_name["shared - trajectory"]
    assert not undecided.claim.decided and undecided.claim.spread == pytest.approx(0.03)
    assert undecided.planned_spread == 0.05 and undecided.seeds_conservative == 7  # the typical 5 points
    assert plan.row_seeds == {"team": 3, "shared": 7, "trajectory": 7}
    assert plan.hours == pytest.approx((3 * 100 + 7 * 300 + 7 * 600) / 3600)
    # 112 instances add 48 test episodes a cell at 1 s each (team: one two-turn episode per instance).
    grown = plan_table(results, instances=112, episode_s=1.0, typical=0.05)
    assert grown.row_seconds["team"] == pytest.approx(148.0)
    # The optimistic reading lets the larger test set shrink the sampling share; the conservative one not.
    shrunk = {p.claim.name: p for p in grown.claims}["shared - trajectory"]
    assert shrunk.seeds_conservative == 7 and shrunk.seeds_optimistic < 7


def test_out_of_reach_claims_are_named_and_do_not_size_the_table():
    results = _results({"hetero": [0.5, 0.1, 0.9], "homo_b": [0.4, 0.4, 0.4]}, {"hetero": 10.0, "homo_b": 10.0})
    plan = plan_table(results, instances=64, episode_s=1.0)
    assert plan.unreachable == ("hetero - homo_b",) and plan.row_seeds == {"hetero": 3, "homo_b": 3}
    assert "Out of reach at 16 seeds" in power_plan.markdown(plan)
