"""benchmarks/experiments/narrow_weights.py: the int8 rows it times reproduce the weight to half a step, and every format's
product is the fp32 product up to its rounding."""

from __future__ import annotations

import torch

from benchmarks.experiments import narrow_weights

narrow = narrow_weights


def test_int8_rows_round_to_half_a_step_of_each_rows_scale():
    weight = torch.tensor([[0.5, -1.0, 0.25], [0.0, 0.0, 0.0], [2.0, 1.0, -0.01]])
    q, scale = narrow.int8_rows(weight)
    assert q.dtype == torch.int8 and q[0, 1] == -127 and q[2, 0] == 127 and torch.all(q[1] == 0)
    assert torch.all((q.float() * scale[:, None] - weight).abs() <= scale[:, None] / 2 + 1e-7)


def test_each_format_gives_the_fp32_product_up_to_its_rounding():
    generator = torch.Generator().manual_seed(0)
    weight, x = torch.randn(64, 32, generator=generator), torch.randn(4, 32, generator=generator)
    reference = x @ weight.T
    for name, tolerance in (("fp32", 1e-6), ("bf16", 2e-2), ("int8", 3e-2)):
        got = narrow.product(name, x, narrow.formats(weight)[name])
        assert got.shape == reference.shape and got.dtype == torch.float32
        assert float((got - reference).abs().max() / reference.abs().max()) < tolerance, name
