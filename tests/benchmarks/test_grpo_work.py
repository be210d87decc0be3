"""benchmarks/grpo_work.py: a GRPO step's unavoidable matmul FLOPs, counted by hand."""

from __future__ import annotations

import pytest

from benchmarks import grpo_work

work = grpo_work

# linear 2 x 10 = 20 per token, attention 4 x 2 x 1 = 8 per (query, key), head 2 x 4 = 8 per logit
SHAPE = work.ModelShape(decoder_weights=10, head_weights=4, hidden=2, layers=1)


def test_forward_flops_by_hand():
    # one prompt of 3 tokens, k = 2 responses of 2 tokens (4 in all): each response feeds 1 token
    prompt = 20 * 3 + 8 * (1 + 2 + 3)  # 108: causal keys 1 + 2 + 3
    response = 20 * 1 + 8 * 4 + 8 * 2  # 68: the fed token sees 3 prompt keys + itself; 2 logits
    assert work.forward_flops(SHAPE, [3], 2, 4, shared_prompt=True) == pytest.approx(prompt + 2 * response)
    assert work.forward_flops(SHAPE, [3], 2, 4, shared_prompt=False) == pytest.approx(2 * prompt + 2 * response)
    assert work.grpo_step_flops(SHAPE, [3], 2, 4, shared_prompt=True) == pytest.approx(4 * 244)
    # a frozen base (LoRA): the update's backward makes the inputs' gradients only, 1 forward's worth
    assert work.grpo_step_flops(SHAPE, [3], 2, 4, shared_prompt=True, frozen_base=True) == pytest.approx(3 * 244)


def test_empty_responses_cost_only_their_prompts():
    assert work.forward_flops(SHAPE, [3, 1], 4, 0, shared_prompt=True) == pytest.approx(108 + (20 + 8))


def test_per_row_prompts_cost_k_times_more_prompt_work():
    shared = work.forward_flops(SHAPE, [50, 60], 8, 0, shared_prompt=True)
    assert work.forward_flops(SHAPE, [50, 60], 8, 0, shared_prompt=False) == pytest.approx(8 * shared)


@pytest.mark.parametrize("args", [([3], 0, 4), ([], 2, 4), ([0], 2, 4), ([3], 2, -1)])
def test_bad_counts_are_refused(args):
    with pytest.raises(ValueError, match="need k >= 1"):
        work.forward_flops(SHAPE, *args, shared_prompt=True)


def test_floor_seconds_and_bad_peak():
    assert work.floor_seconds(2e9, 4.0) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="peak must be positive"):
        work.floor_seconds(1.0, 0.0)


def test_model_shape_of_a_llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2)
    shape = work.ModelShape.of(LlamaForCausalLM(config))
    per_layer = 16 * 16 + 2 * (16 * 8) + 16 * 16 + 3 * 16 * 24  # q, k and v (2 kv heads of 4), o, gate/up/down
    assert shape == work.ModelShape(decoder_weights=2 * per_layer, head_weights=50 * 16, hidden=16, layers=2)
