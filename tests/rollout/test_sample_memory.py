"""Sampling within a memory bound: a call too big for `memory_gb` runs in chunks that fit, with the same
greedy tokens; a call that fits is one call, exactly as before."""

import torch

from teamrl.rollout import builtin_engine as engine
from teamrl.rollout.builtin_engine import SamplingParams, prompts_per_call, row_bytes, sample
from toy import tiny_policy


def test_row_bytes_counts_keys_values_and_vocabulary_rows():
    policy = tiny_policy("llama")  # 2 layers, 2 KV heads of 32 / 4 = 8 dims, the char vocabulary
    vocab = policy.model.config.vocab_size
    assert row_bytes(policy.model, 10) == 2 * 2 * 2 * 8 * 4 * 10 + 3 * 4 * vocab


def test_prompts_per_call_fits_the_budget():
    policy = tiny_policy("llama")
    prompts = [[5, 6, 7]] * 10
    per_prompt = 3 * row_bytes(policy.model, 3 + 4)
    params = SamplingParams(max_new_tokens=4, memory_gb=4.5 * per_prompt / 2**30)
    assert prompts_per_call(policy.model, prompts, 3, params) == 4
    assert prompts_per_call(policy.model, prompts, 3, SamplingParams(max_new_tokens=4)) == 10  # fits: one call
    tiny = SamplingParams(max_new_tokens=4, memory_gb=1e-12)
    assert prompts_per_call(policy.model, prompts, 3, tiny) == 1  # never fewer than one prompt


def test_chunked_greedy_sampling_equals_one_call(monkeypatch):
    policy = tiny_policy("llama")
    prompts = [policy.encode_prompt(p) for p in ["ab", "tool\n>", "xyz?", "plan\n>", "q"]]
    whole = sample(policy, prompts, 2, SamplingParams(temperature=0.0, max_new_tokens=6),
                   torch.Generator().manual_seed(0))
    calls = []
    real_open = engine.open_decoder
    monkeypatch.setattr(engine, "open_decoder", lambda model, ids, *a, **kw: calls.append(len(ids)) or real_open(model, ids, *a, **kw))
    budget = 2.5 * 2 * row_bytes(policy.model, max(map(len, prompts)) + 6) / 2**30
    chunked = sample(policy, prompts, 2, SamplingParams(temperature=0.0, max_new_tokens=6, memory_gb=budget),
                     torch.Generator().manual_seed(0))
    assert calls == [2, 2, 1]
    assert [[g.response_ids for g in row] for row in chunked] == [[g.response_ids for g in row] for row in whole]
    # log-probs equal up to float rounding (the chunks pad their prompts to other lengths)
    got, want = ([lp for row in gens for g in row for lp in g.logprobs] for gens in (chunked, whole))
    assert torch.allclose(torch.tensor(got), torch.tensor(want), atol=1e-5)
