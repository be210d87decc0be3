"""The arithmetic probe: its choices follow the timings, and its result is cached per host description."""

import json

import pytest
import torch

from teamrl.policies import arithmetic_probe as probe_module
from teamrl.policies.arithmetic_probe import (
    BF16_MARGIN,
    PATHS,
    SHAPES,
    cached_probe,
    host_probe,
    measure,
    resolve_sampler_dtype,
    time_matmul,
)
from teamrl.policies.cpu_linear import onednn_available, resolve_cpu_linear


def fixed_timer(mkl: float, onednn: float, bf16: float, calls: list | None = None):
    """A timer reporting the same GFLOP/s for every shape of a path (and counting its calls)."""
    figures = {"mkl_fp32": mkl, "onednn_fp32": onednn, "bf16": bf16}

    def timer(path, shape):
        if calls is not None:
            calls.append((path, shape))
        return figures[path]
    return timer


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEAMRL_CACHE", str(tmp_path))
    host_probe.cache_clear()
    yield tmp_path / "arithmetic"
    host_probe.cache_clear()


@pytest.mark.parametrize("bf16, expected", [(200.0, "bfloat16"), (100.0 * BF16_MARGIN * 0.99, "float32"),
                                            (10.0, "float32")])
def test_bf16_is_chosen_only_where_it_beats_fp32_by_the_margin(bf16, expected):
    probe = measure(fixed_timer(mkl=90.0, onednn=100.0, bf16=bf16))
    assert probe.sampler_dtype == expected


@pytest.mark.parametrize("mkl, onednn, expected", [(100.0, 214.0, "onednn"), (88.5, 72.9, "torch"),
                                                   (100.0, 105.0, "torch"), (100.0, 0.0, "torch")])
def test_onednn_is_chosen_where_it_measured_faster_than_mkl(mkl, onednn, expected):
    assert measure(fixed_timer(mkl, onednn, 50.0)).cpu_linear == expected


def test_the_result_is_cached_per_host_and_measured_again_for_another(cache, monkeypatch):
    calls: list = []
    first = cached_probe(fixed_timer(90.0, 100.0, 200.0, calls))
    assert len(calls) == len(PATHS) * len(SHAPES)
    (written,) = cache.glob("probe-*.json")
    assert json.loads(written.read_text())["sampler_dtype"] == "bfloat16"
    # a second run on the host reads the file: no timing, the same choice even where timings would now differ
    again = cached_probe(fixed_timer(90.0, 100.0, 10.0, calls))
    assert len(calls) == len(PATHS) * len(SHAPES) and again == first
    # another torch version is another host: measured again, with the new timings' choice, in a second file
    description = probe_module.host_description()
    monkeypatch.setattr(probe_module, "host_description", lambda: description | {"torch": "9.9.9"})
    other = cached_probe(fixed_timer(90.0, 100.0, 10.0, calls))
    assert len(calls) == 2 * len(PATHS) * len(SHAPES)
    assert other.sampler_dtype == "float32" and other.key != first.key
    assert len(list(cache.glob("probe-*.json"))) == 2


def test_a_damaged_cache_file_is_measured_again(cache):
    calls: list = []
    cached_probe(fixed_timer(90.0, 100.0, 200.0, calls))
    (written,) = cache.glob("probe-*.json")
    written.write_text("{not json")
    assert cached_probe(fixed_timer(90.0, 100.0, 200.0, calls)).sampler_dtype == "bfloat16"
    assert len(calls) == 2 * len(PATHS) * len(SHAPES)


def test_measured_and_auto_settings_resolve_through_the_host_probe(cache, monkeypatch):
    monkeypatch.setattr(probe_module, "time_matmul", fixed_timer(90.0, 214.0, 300.0))
    assert resolve_sampler_dtype("auto") == "bfloat16"
    assert resolve_sampler_dtype("float32") == "float32"
    assert resolve_sampler_dtype("auto", "cuda:0") == "float32"
    assert resolve_cpu_linear("measured") == ("onednn" if onednn_available() else "torch")
    assert resolve_cpu_linear("measured", "cuda:0") == "torch"
    with pytest.raises(ValueError, match="sampler_dtype must be float32, bfloat16 or auto"):
        resolve_sampler_dtype("fp16")


def test_the_real_timer_measures_each_path():
    """A tiny shape through each path: a positive rate (the op exists in this torch) and unknown paths refused."""
    torch.manual_seed(0)
    for path in PATHS:
        if path == "onednn_fp32" and not onednn_available():
            continue
        assert time_matmul(path, (4, 64, 64), seconds=0.001) > 0
    with pytest.raises(ValueError, match="unknown arithmetic path"):
        time_matmul("fp8", (4, 64, 64))
