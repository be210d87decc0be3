"""The study's statistics against hand-computed values."""

import math

import pytest

from teamrl.study.protocol import Protocol, mean_pass_at_k, paired, pass_at_k, summarize, t_critical


def test_summary_of_three_seeds_by_hand():
    s = summarize([0.30, 0.50, 0.40])
    # mean 0.4; deviations -0.1, 0.1, 0 -> variance 0.02 / 2 = 0.01 -> std 0.1;
    # half-width t(2) * 0.1 / sqrt(3) = 4.303 * 0.057735 = 0.248434
    assert s.mean == pytest.approx(0.4)
    assert s.std == pytest.approx(0.1)
    assert s.low == pytest.approx(0.4 - 0.248434, abs=1e-6)
    assert s.high == pytest.approx(0.4 + 0.248434, abs=1e-6)


def test_one_seed_has_no_spread():
    s = summarize([0.7])
    assert (s.n, s.mean, s.std, s.low, s.high) == (1, 0.7, None, None, None)


def test_summary_refuses_no_values_and_nan():
    with pytest.raises(ValueError, match="at least one value"):
        summarize([])
    with pytest.raises(ValueError, match="non-finite"):
        summarize([0.1, math.nan])


def test_t_critical_values():
    assert t_critical(1) == 12.706 and t_critical(4) == 2.776 and t_critical(100) == 1.96
    with pytest.raises(ValueError):
        t_critical(0)


def test_paired_differences_use_common_seeds_only():
    p = paired({0: 0.6, 1: 0.5, 2: 0.9}, {0: 0.4, 1: 0.6, 3: 0.0})
    # seeds 0 and 1: differences +0.2 and -0.1 -> mean 0.05, std sqrt(((0.15)^2 + (0.15)^2) / 1) = 0.212132
    assert p.diff.n == 2
    assert p.diff.mean == pytest.approx(0.05)
    assert p.diff.std == pytest.approx(0.212132, abs=1e-6)
    assert (p.wins, p.losses, p.ties) == (1, 1, 0)
    with pytest.raises(ValueError, match="no seed in common"):
        paired({0: 1.0}, {1: 1.0})


def test_pass_at_k_by_hand():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 1, 5) == 1.0
    assert pass_at_k(8, 2, 1) == pytest.approx(0.25)
    # two instances: one solved 1 of 2 times, one never -> pass@1 = (0.5 + 0) / 2, pass@2 = (1 + 0) / 2
    outcomes = [[True, False], [False, False]]
    assert mean_pass_at_k(outcomes, 1) == pytest.approx(0.25)
    assert mean_pass_at_k(outcomes, 2) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)


def test_protocol_gives_each_seed_its_own_warmup_and_checks_its_fields():
    protocol = Protocol(seeds=(0, 1, 2))
    assert len({protocol.warmup_seed(s) for s in protocol.seeds}) == 3
    with pytest.raises(ValueError, match="distinct"):
        Protocol(seeds=(1, 1))
    with pytest.raises(ValueError, match="test_instances must be >= 1"):
        Protocol(test_instances=0)


def test_verdict_reads_the_interval_against_the_claim():
    from teamrl.study.protocol import verdict

    above = paired({0: 0.5, 1: 0.6, 2: 0.55}, {0: 0.2, 1: 0.3, 2: 0.3})  # +30, +30, +25 points
    below = paired({0: 0.2, 1: 0.3, 2: 0.3}, {0: 0.5, 1: 0.6, 2: 0.55})
    assert verdict(above) == "agrees: a > b (interval above 0; n = 3 seeds)"
    assert verdict(below) == "against: a < b (interval below 0; n = 3 seeds)"
    assert verdict(below, directed=False) == "a < b (interval below 0; n = 3 seeds)"
    spread = paired({0: 0.5, 1: 0.1, 2: 0.5}, {0: 0.3, 1: 0.3, 2: 0.3})  # +20, -20, +20: mean +6.7, wide
    assert verdict(spread) == "not established (interval spans 0; a > b on 2 of 3 seeds; n = 3 seeds)"
    assert verdict(paired({0: 0.4}, {0: 0.5}), instances=64) == (
        "one seed: a < b, no interval (n = 1 seeds x 64 test instances)"
    )


def test_verdict_bounds_an_interval_inside_the_planned_bound():
    from teamrl.study.protocol import verdict

    # Differences +0.02, -0.02, +0.03, -0.01 (4 seeds): mean +0.005, sample std 0.023805 (sum of squared
    # deviations 0.0017, / 3 = 0.000567), t(3) = 3.182, half-width 3.182 * 0.023805 / 2 = 0.037874:
    # interval [-3.3, +4.3] points.
    small = paired({0: 0.52, 1: 0.48, 2: 0.53, 3: 0.49}, {0: 0.5, 1: 0.5, 2: 0.5, 3: 0.5})
    assert small.diff.low == pytest.approx(0.005 - 0.037874, abs=1e-5)
    assert small.diff.high == pytest.approx(0.005 + 0.037874, abs=1e-5)
    assert verdict(small, bound=0.05, instances=200) == (
        "no effect larger than 5 points (a - b in [-3.3, +4.3], inside ±5; n = 4 seeds x 200 test instances)"
    )
    # The same interval against a 4-point bound reaches past +4: not established, and says why.
    assert verdict(small, bound=0.04) == (
        "not established (interval spans 0 and reaches past the ±4-point bound; a > b on 2 of 4 "
        "seeds; n = 4 seeds)"
    )
    # Without a bound, the old reading.
    assert verdict(small).startswith("not established (interval spans 0; a > b on 2 of 4 seeds")
    # An interval above 0 and inside the bound agrees, and says the effect is small.
    tiny_gain = paired({0: 0.52, 1: 0.53, 2: 0.52}, {0: 0.5, 1: 0.5, 2: 0.5})
    assert verdict(tiny_gain, bound=0.05) == (
        "agrees: a > b (interval above 0, inside ±5 points: a small effect; n = 3 seeds)"
    )
    # An interval that crosses a bound but not 0 still agrees (the bound only reads intervals spanning 0).
    assert verdict(paired({0: 0.6, 1: 0.7, 2: 0.65}, {0: 0.5, 1: 0.5, 2: 0.5}), bound=0.05).startswith("agrees")
    # The edge: an interval ending exactly at the bound is inside it.
    edge = paired({0: 0.55, 1: 0.45}, {0: 0.5, 1: 0.5})  # mean 0, half-width 12.706 * 0.0707 / 1.414 = 0.6353
    assert verdict(edge, bound=0.6353).startswith("not established")
    assert verdict(edge, bound=0.64).startswith("no effect larger than 64 points")


def test_equal_differences_give_no_interval_unless_floored_at_the_test_sets_noise():
    from teamrl.study.protocol import verdict

    # Two seeds of a 64-problem test set that each gain exactly 11 problems: a zero-width interval, no spread.
    same_gain = paired({0: 23 / 64, 1: 22 / 64}, {0: 12 / 64, 1: 11 / 64})
    assert same_gain.diff.low == same_gain.diff.high and not same_gain.floored
    assert verdict(same_gain, bound=0.10, instances=64) == (
        "not established (all 2 differences equal, +17.2 points: no spread measured, so no interval; "
        "n = 2 seeds x 64 test instances)"
    )
    # Knowing the 64 episodes, the spread is floored at their sampling noise: sqrt(mean(a(1-a) + b(1-b)) / 64),
    # 8.1 points here, and t(1) = 12.706 makes the two-seed interval span 0.
    floored = paired({0: 23 / 64, 1: 22 / 64}, {0: 12 / 64, 1: 11 / 64}, episodes=64)
    noise = ((23 / 64) * (41 / 64) + (12 / 64) * (52 / 64) + (22 / 64) * (42 / 64) + (11 / 64) * (53 / 64)) / 2 / 64
    assert floored.floored and floored.diff.std == pytest.approx(noise**0.5)
    assert floored.diff.low == pytest.approx(11 / 64 - 12.706 * noise**0.5 / 2**0.5, abs=1e-4)
    assert verdict(floored, bound=0.10, instances=64) == (
        "not established (interval spans 0 and reaches past the ±10-point bound; a > b on 2 of 2 seeds; "
        "n = 2 seeds x 64 test instances; all 2 differences equal, spread set to the test set's sampling noise)"
    )
    # Rows at 100% and 0% on every seed have no sampling noise: the floor is 0 and the claim is read as measured.
    extremes = paired({0: 1.0, 1: 1.0, 2: 1.0}, {0: 0.0, 1: 0.0, 2: 0.0}, episodes=64)
    assert verdict(extremes).startswith("agrees: a > b (interval above 0")
