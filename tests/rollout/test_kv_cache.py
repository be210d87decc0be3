"""The reserved KV cache changes nothing but speed: the same samples and log-probs as DynamicCache."""

import pytest
import torch
from transformers import DynamicCache

from teamrl.rollout import builtin_engine as engine, decoding
from teamrl.rollout.builtin_engine import SamplingParams, sample
from toy import tiny_policy

PROMPTS = ["tool\n#..S\n..G.\n>", "ab", "plan\nstart=(0,1) goal=(2,3)\n>"]


def _draw(policy, monkeypatch, cache_factory):
    # the reserved cache serves the HF-forward decoder (the lean decoder has its own buffers)
    monkeypatch.setattr(decoding, "LEAN_DECODE", False)
    monkeypatch.setattr(decoding, "reserved_cache", cache_factory)
    return _draw_as_is(policy)


def _draw_as_is(policy):
    prompts = [policy.encode_prompt(p) for p in PROMPTS]
    # 4 samples per prompt; rows that hit a stop string leave the batch mid-way
    return sample(policy, prompts, 4, SamplingParams(temperature=1.0, max_new_tokens=16, stop_strings=("a", "e")),
                  torch.Generator().manual_seed(0))


def context_sensitive_policy(arch):
    """A toy policy whose next token depends on the earlier ones (at the default init scale of 0.02
    it barely does, and a cache that mixed up rows would go unnoticed)."""
    policy = tiny_policy(arch)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in policy.model.parameters():
            if param.dim() == 2:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    return policy


@pytest.mark.parametrize("arch", ["llama", "qwen2", "phi3"])
def test_reserved_cache_samples_what_dynamic_cache_samples(arch, monkeypatch):
    policy = context_sensitive_policy(arch)
    real = decoding.reserved_cache
    reference = _draw(policy, monkeypatch, lambda reserve: DynamicCache())
    for factory in (real, lambda reserve: real(0)):  # 0: no room reserved, every step grows the buffer
        got = _draw(policy, monkeypatch, factory)
        for want_group, got_group in zip(reference, got, strict=True):
            for want, have in zip(want_group, got_group, strict=True):
                assert have.response_ids == want.response_ids
                assert have.logprobs == pytest.approx(want.logprobs, abs=1e-5)
    lengths = {len(g.response_ids) for group in reference for g in group}
    assert len(lengths) > 1  # rows did finish at different steps, so rows were dropped


def test_reserved_layer_exposes_only_the_filled_part():
    cache = decoding.reserved_cache(4)
    k = torch.randn(2, 1, 3, 2)
    keys, _ = cache.update(k, k, 0)
    assert keys.shape == (2, 1, 3, 2) and torch.equal(keys, k)
    step = torch.randn(2, 1, 1, 2)
    keys, values = cache.update(step, step, 0)
    assert keys.shape == (2, 1, 4, 2) and torch.equal(keys[:, :, 3:], step) and torch.equal(values[:, :, :3], k)
    cache.batch_select_indices(torch.tensor([1]))
    assert torch.equal(cache.layers[0].keys, torch.cat([k, step], dim=2)[1:])
    assert cache.get_seq_length() == 4


@pytest.mark.parametrize("lean", [False, True])
def test_when_finished_rows_leave_the_batch_changes_no_sample(monkeypatch, lean):
    """Compaction at every step, at the default threshold, or never: the same samples (both decoders)."""
    policy = context_sensitive_policy("llama")
    monkeypatch.setattr(decoding, "LEAN_DECODE", lean)
    runs = []
    for threshold in (0.0, engine.COMPACT_WHEN_FINISHED, 2.0):  # every step, the default, never
        monkeypatch.setattr(engine, "COMPACT_WHEN_FINISHED", threshold)
        runs.append(_draw_as_is(policy))
    for other in runs[1:]:
        for want_group, got_group in zip(runs[0], other, strict=True):
            for want, have in zip(want_group, got_group, strict=True):
                assert (have.response_ids, have.finished) == (want.response_ids, want.finished)
                assert have.logprobs == pytest.approx(want.logprobs, abs=1e-5)
