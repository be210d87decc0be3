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

    above = paired({0: 0.5, 1: 0.6, 2: 0.55}, {0: 0.2, 1: 0.3, 2: 0.25})  # +30 points on every seed
    below = paired({0: 0.2, 1: 0.3, 2: 0.25}, {0: 0.5, 1: 0.6, 2: 0.55})
    assert verdict(above) == "agrees: a > b (interval above 0)"
    assert verdict(below) == "against: a < b (interval below 0)"
    assert verdict(below, directed=False) == "a < b (interval below 0)"
    spread = paired({0: 0.5, 1: 0.1, 2: 0.5}, {0: 0.3, 1: 0.3, 2: 0.3})  # +20, -20, +20: mean +6.7, wide
    assert verdict(spread) == "not established (interval spans 0; a > b on 2 of 3 seeds)"
    assert verdict(paired({0: 0.4}, {0: 0.5})) == "one seed: a < b, no interval"
