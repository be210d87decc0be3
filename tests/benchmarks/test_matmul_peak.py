"""benchmarks/matmul_peak.py: the FLOP count and the share-of-peak arithmetic, by hand."""

import pytest

from benchmarks import matmul_peak

peak = matmul_peak


def test_matmul_flops_counts_a_multiply_and_an_add_per_term():
    assert peak.matmul_flops(2, 3, 4) == 48.0  # 2*4 outputs, 3 terms each, 2 flops per term


def test_share_of_peak_by_hand():
    # 50 GFLOP in 2 s is 25 GFLOP/s: a quarter of a 100 GFLOP/s peak
    assert peak.share_of_peak(50e9, 2.0, 100.0) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="positive"):
        peak.share_of_peak(1.0, 0.0, 100.0)


def test_measured_peak_is_a_positive_rate():
    assert peak.measure_matmul_peak(size=64, repeats=2) > 0
    with pytest.raises(ValueError, match="size must be"):
        peak.measure_matmul_peak(size=8)


def test_the_onednn_backend_is_a_positive_rate_and_an_unknown_one_is_refused():
    from teamrl.policies.cpu_linear import onednn_available

    if onednn_available():
        assert peak.measure_matmul_peak(size=64, repeats=2, backend="onednn") > 0
    with pytest.raises(ValueError, match="torch or onednn"):
        peak.measure_matmul_peak(size=64, backend="blas")
