"""LoRA policies on one base served by ONE vLLM engine: each request gets its own adapter's distribution,
in one batch, before and after an update of one adapter."""

from __future__ import annotations

import pytest
import torch

from teamrl.config import LoraConfig
from teamrl.policies.loading import Policy
from teamrl.policies.lora import activate, adapter_parameters, attach_adapters
from teamrl.policies.scoring import pack_responses, response_logprobs
from teamrl.rollout import engine_routing, sampler
from teamrl.rollout.builtin_engine import SamplingParams
from vllm_helpers import small_policy

PROMPTS = ["tool\n#..S\n>", "plan\nstart=(0,1)\n>"]
ATOL = 1e-4


@pytest.fixture(scope="module")
def pair():
    """Two LoRA policies (planner, tool) on one tied-embedding Llama base, adapters set apart."""
    base = small_policy("llama", tied=True)
    settings = LoraConfig(r=8, alpha=16, target_modules=["q_proj", "v_proj", "o_proj"])
    network = attach_adapters(base.network, {"planner": settings, "tool": settings})
    torch.manual_seed(3)
    with torch.no_grad():  # PEFT starts lora_B at zero (adapter = base); make the two differ from it and each other
        for name in ("planner", "tool"):
            for param in adapter_parameters(network, name):
                param.normal_(0, 0.3)
    policies = {name: Policy(name, network, base.tokenizer, False, adapter=name) for name in ("planner", "tool")}
    engine_routing.serve_with_vllm(policies, kv_cache_gb=0.125)
    yield policies
    sampler.release(policies)


def trainer_logprobs(policy, gens, temperature=1.0):
    batch = pack_responses([g.prompt_ids for g in gens], [g.response_ids for g in gens],
                           policy.tokenizer.pad_token_id)
    with torch.no_grad():
        logp, _ = response_logprobs(policy.model, batch, temperature=temperature)
    return [logp[i, : len(g.response_ids)] for i, g in enumerate(gens)]


def gap(policy, gens, temperature=1.0):
    return max(float((ref - torch.tensor(g.logprobs)).abs().max())
               for ref, g in zip(trainer_logprobs(policy, gens, temperature), gens))


def requests_of_both(pair):
    return [sampler.SampleRequest(pair[name], [pair[name].encode_prompt(p) for p in PROMPTS], 3,
                                  SamplingParams(temperature=1.0, max_new_tokens=10)) for name in ("planner", "tool")]


def batch_of_both(pair, seed=0):
    engine = sampler.served_by(pair["planner"])
    out = engine.sample_batch(requests_of_both(pair), torch.Generator().manual_seed(seed))
    return {name: [g for group in groups for g in group] for name, groups in zip(("planner", "tool"), out)}


def test_both_adapters_share_one_engine(pair):
    assert sampler.served_by(pair["planner"]) is sampler.served_by(pair["tool"]) is not None


def test_one_batch_gives_each_request_its_own_adapter(pair):
    gens = batch_of_both(pair)
    for name, other in (("planner", "tool"), ("tool", "planner")):
        assert gap(pair[name], gens[name]) < ATOL
        assert gap(pair[other], gens[name]) > 1e-2  # the other adapter's distribution is another one


def test_an_updated_adapter_replaces_the_old_one(pair):
    planner, tool = pair["planner"], pair["tool"]
    before = batch_of_both(pair, seed=1)
    tool_before = trainer_logprobs(tool, before["tool"])
    optimizer = torch.optim.SGD(adapter_parameters(planner.network, "planner"), lr=0.5)
    gens = before["planner"]
    pack = pack_responses([g.prompt_ids for g in gens], [g.response_ids for g in gens], planner.tokenizer.pad_token_id)
    activate(planner.network, "planner")
    logp, _ = response_logprobs(planner.model, pack)
    (-(logp * pack.response_mask).sum()).backward()
    optimizer.step()
    planner_moved = trainer_logprobs(planner, gens)
    assert max(float((torch.tensor(g.logprobs) - m).abs().max()) for g, m in zip(gens, planner_moved)) > 1e-2
    after = batch_of_both(pair, seed=2)
    assert gap(planner, after["planner"]) < ATOL  # the new planner adapter samples
    assert gap(tool, after["tool"]) < ATOL  # the tool adapter, untouched, still its own
    assert all(torch.allclose(a, b) for a, b in zip(tool_before, trainer_logprobs(tool, before["tool"])))


def test_the_driver_dispatch_samples_a_lora_policy(pair):
    tool = pair["tool"]
    groups = engine_routing.sample(tool, [tool.encode_prompt(PROMPTS[0])], 4, SamplingParams(max_new_tokens=6),
                            torch.Generator().manual_seed(0))
    assert len(groups) == 1 and len(groups[0]) == 4
    assert gap(tool, groups[0]) < ATOL


def test_sample_many_batches_both_adapters_like_separate_calls(pair, monkeypatch):
    engine = sampler.served_by(pair["planner"])
    calls = []
    real_generate = engine.llm.generate
    monkeypatch.setattr(engine.llm, "generate", lambda *a, **k: calls.append(len(a[0])) or real_generate(*a, **k))
    together = engine_routing.sample_many(requests_of_both(pair), torch.Generator().manual_seed(7))
    assert calls == [2 * len(PROMPTS)]  # one generate call holds both policies' prompts
    gen = torch.Generator().manual_seed(7)
    apart = [engine_routing.sample(r.policy, r.prompts, r.num_samples, r.params, gen) for r in requests_of_both(pair)]
    assert [[[g.response_ids for g in grp] for grp in res] for res in together] == \
        [[[g.response_ids for g in grp] for grp in res] for res in apart]


def test_a_parallel_workflow_samples_both_roles_in_one_batch_per_turn(pair, monkeypatch):
    import random

    from teamrl.rollout.tree import RewardWeights, run_episodes
    from toy import ToyWorkflow

    engine = sampler.served_by(pair["planner"])
    calls = []
    real_generate = engine.llm.generate
    monkeypatch.setattr(engine.llm, "generate", lambda *a, **k: calls.append(len(a[0])) or real_generate(*a, **k))
    samples, _ = run_episodes(ToyWorkflow(parallel=True, max_turns=2), [0, 1], "train", pair,
                              {"a": "planner", "b": "tool"}, SamplingParams(max_new_tokens=6), 2, RewardWeights(),
                              torch.Generator().manual_seed(0), random.Random(0))
    assert calls == [4, 4]  # per turn: 2 episodes x 2 agents, in one call
    for agent, name in (("a", "planner"), ("b", "tool")):
        assert gap(pair[name], [s.generation for s in samples if s.agent == agent]) < ATOL


def test_adapters_on_a_base_vllm_serves_without_lora_are_refused_before_the_engine_starts(monkeypatch):
    """vLLM's GPT-2 takes no LoRA adapters: per-role adapters on it are one clear ConfigError naming the fixes,
    raised before any engine starts (vLLM would fail inside its start-up); a full GPT-2 policy passes the check."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from teamrl.config import ConfigError
    from teamrl.policies.tiny_model import build_char_tokenizer
    from teamrl.rollout import vllm_engine

    tok = build_char_tokenizer()
    torch.manual_seed(0)
    base = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=64, n_layer=1, n_head=2, n_positions=128,
                                      bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)).eval()
    vllm = vllm_engine.import_vllm()
    vllm_engine.check_supported(base, vllm)  # full weights: vLLM serves GPT-2 (head size 32)
    network = attach_adapters(base, {name: LoraConfig(r=2, target_modules=["c_attn"]) for name in ("a", "b")})
    policies = {name: Policy(name, network, tok, False, adapter=name) for name in ("a", "b")}
    started = []
    monkeypatch.setattr(vllm_engine.VllmEngine, "_start", lambda self, *a: started.append(1))
    with pytest.raises(ConfigError, match=r"GPT2LMHeadModel without LoRA adapters.*policy\.lora: null.*builtin"):
        engine_routing.serve_with_vllm(policies, kv_cache_gb=0.125)
    assert not started and all(sampler.served_by(p) is None for p in policies.values())


def test_adapters_on_every_linear_layer_the_embedding_and_the_head_with_two_ranks_sample_the_trainers_distribution():
    """teamrl's LoRA settings as vLLM loads them: one adapter on all seven projections, embed_tokens and lm_head
    (r=4), one on q_proj alone (r=16), in one engine (max_lora_rank 16): each samples its own distribution."""
    base = small_policy("llama", tied=False)
    everywhere = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "embed_tokens",
                  "lm_head"]
    network = attach_adapters(base.network, {"wide": LoraConfig(r=4, alpha=8, target_modules=everywhere),
                                             "narrow": LoraConfig(r=16, alpha=8, target_modules=["q_proj"])})
    torch.manual_seed(3)
    with torch.no_grad():  # smaller than the pair's 0.3: nine adapted modules at 0.3 push float32 past ATOL
        for name in ("wide", "narrow"):
            for param in adapter_parameters(network, name):
                param.normal_(0, 0.1)
    policies = {name: Policy(name, network, base.tokenizer, False, adapter=name) for name in ("wide", "narrow")}
    engine_routing.serve_with_vllm(policies, kv_cache_gb=0.125)
    try:
        for name, other in (("wide", "narrow"), ("narrow", "wide")):
            policy = policies[name]
            groups = engine_routing.sample(policy, [policy.encode_prompt(p) for p in PROMPTS], 3,
                                           SamplingParams(temperature=1.0, max_new_tokens=8),
                                           torch.Generator().manual_seed(0))
            gens = [g for group in groups for g in group]
            assert gap(policy, gens) < ATOL
            assert gap(policies[other], gens) > 1e-2  # the adapters do change the distribution
    finally:
        sampler.release(policies)
