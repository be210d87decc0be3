"""benchmarks/rollout_engine.py: what its share-of-peak figure counts, by hand."""

import time

import pytest

from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from benchmarks import rollout_engine

bench = rollout_engine


def _model():
    # 99 symbols, hidden 8, one layer, 2 heads, MLP 16, tied embeddings
    return build_tiny_model(build_char_tokenizer(), hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16)


def test_matmul_parameters_are_the_linear_weights_and_the_tied_head_once():
    # q, k, v, o: 4 x 8 x 8 = 256; gate, up, down: 3 x 8 x 16 = 384; LM head (the embedding): 99 x 8 = 792
    assert bench.matmul_parameters(_model()) == 256 + 384 + 792


def test_sample_flops_by_hand():
    # 2 prompts of width 3, K = 2, 3 tokens: linear 2 x 1432 = 2864 per token; attention 4 x 8 x 1 layer
    # = 32 per token per context position. Prefill: 2 x 3 tokens x 2864 + 2 prompts x 32 x (3 x 4 / 2).
    # Decode steps 1 and 2 feed 4 rows at contexts 4 and 5.
    prefill = 6 * 2864 + 2 * 32 * 6
    decode = 4 * (2864 + 32 * 4) + 4 * (2864 + 32 * 5)
    assert bench.sample_flops(_model(), 3, 2, 2, 3) == pytest.approx(prefill + decode)
    assert bench.sample_flops(_model(), 3, 2, 2, 1) == pytest.approx(prefill)  # no decode step


def test_the_peak_can_be_taken_on_the_cpu_clock():
    assert bench.measure_matmul_peak(size=64, repeats=2, clock=time.process_time) > 0
