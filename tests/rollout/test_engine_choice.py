"""rollout.engine: the config check, the dispatch the driver calls, and the log-prob gap metric (no vLLM needed)."""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import random

import pytest
import torch

from teamrl.config import ConfigError, load_config
from teamrl.rollout import engine_routing, sampler
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.logprob_gap import gap_metrics
from teamrl.rollout.tree import RewardWeights, run_episodes
from toy import ToyWorkflow, tiny_policy


def test_engine_vllm_without_vllm_fails_at_config_load_with_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    with pytest.raises(ConfigError, match=r'rollout\.engine.*pip install "teamrl\[vllm\]"'):
        load_config(None, ["rollout.engine=vllm"])


def test_engine_names_and_combinations_are_checked():
    with pytest.raises(ConfigError, match="builtin or vllm"):
        load_config(None, ["rollout.engine=vlm"])
    with pytest.raises(ConfigError, match="by_role.writer: unknown key.*engine"):
        load_config(None, ["rollout.by_role={writer: {engine: builtin}}"])
    with pytest.raises(ConfigError, match="vllm_kv_cache_gb"):
        load_config(None, ["rollout.vllm_kv_cache_gb=0"])


def test_engine_vllm_refuses_rollout_workers(monkeypatch):
    real = importlib.util.find_spec
    installed = importlib.machinery.ModuleSpec("vllm", None, origin="/site-packages/vllm/__init__.py")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: installed if name == "vllm" else real(name, *a))
    with pytest.raises(ConfigError, match="rollout_workers=0"):
        load_config(None, ["rollout.engine=vllm", "trainer.backend=ray", "trainer.rollout_workers=1"])


class Recording:
    """A stand-in engine: records its calls and answers with the built-in engine's samples."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.closed = False

    def sample(self, policy, prompts, num_samples, params, generator):
        self.calls.append(policy.name)
        return engine_routing.builtin.sample(policy, prompts, num_samples, params, generator)

    def close(self) -> None:
        self.closed = True


def test_the_driver_samples_through_the_policys_engine_until_it_is_released():
    served, plain = tiny_policy(name="served"), tiny_policy(name="plain", seed=1)
    fake = Recording()
    sampler.serve(served, fake)
    try:
        run_episodes(ToyWorkflow(max_turns=1), [0, 1], "train", {"served": served, "plain": plain},
                     {"a": "served", "b": "plain"}, SamplingParams(max_new_tokens=3), 2, RewardWeights(),
                     torch.Generator().manual_seed(0), random.Random(0))
        assert fake.calls == ["served"]  # one call for agent a; agent b's policy has no engine
        assert sampler.served_by(copy.deepcopy(served)) is None  # a copy (a KL reference) samples built-in
    finally:
        sampler.release({"served": served, "plain": plain})
    assert fake.closed and sampler.served_by(served) is None


def test_gap_metrics_measure_the_difference_and_warn_above_the_threshold():
    policy = tiny_policy()
    samples, _ = run_episodes(ToyWorkflow(max_turns=1), [0, 1], "train", {"p": policy}, {"a": "p", "b": "p"},
                              SamplingParams(max_new_tokens=5), 2, RewardWeights(),
                              torch.Generator().manual_seed(0), random.Random(0))
    metrics, warnings = gap_metrics({"p": policy}, samples, warn_above=0.01)
    assert metrics["rollout/logprob_gap/p"] < 1e-5 and not warnings  # the built-in engine is the trainer
    for s in samples:  # a sampler 0.25 nats off on every token
        s.generation.logprobs = [v + 0.25 for v in s.generation.logprobs]
    metrics, warnings = gap_metrics({"p": policy}, samples, warn_above=0.01)
    assert metrics["rollout/logprob_gap/p"] == pytest.approx(0.25, abs=1e-5)
    assert metrics["rollout/logprob_gap_max/p"] == pytest.approx(0.25, abs=1e-5)
    assert "policy p" in warnings["p"] and "logprob_gap_warn" in warnings["p"]


def test_vllm_calls_are_chunked_to_one_scheduler_step_of_prompt_tokens(monkeypatch):
    from teamrl.rollout import vllm_engine  # imports vLLM only when an engine starts

    monkeypatch.setattr(vllm_engine, "MAX_BATCHED_TOKENS", 100)
    # K=4: prompts of 10, 10, 5 tokens cost 40, 40, 20 -> [0, 1, 2] fits 100; 30 (120) stands alone
    assert vllm_engine._chunks([10, 10, 5, 30, 1], 4) == [[0, 1, 2], [3], [4]]
    assert vllm_engine._chunks([], 4) == []


class Batching(Recording):
    """A stand-in engine that samples batches: records each batch's policies."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def sample_batch(self, requests, generator):
        self.batches.append([r.policy.name for r in requests])
        return [engine_routing.builtin.sample(r.policy, r.prompts, r.num_samples, r.params, generator) for r in requests]


@pytest.mark.parametrize("parallel", [True, False])
def test_parallel_agents_reach_a_batching_engine_together(parallel):
    first, second = tiny_policy(name="first"), tiny_policy(name="second", seed=1)
    fake = Batching()
    for policy in (first, second):
        sampler.serve(policy, fake)
    try:
        samples, _ = run_episodes(ToyWorkflow(parallel=parallel, max_turns=2), [0, 1], "train",
                                  {"first": first, "second": second}, {"a": "first", "b": "second"},
                                  SamplingParams(max_new_tokens=3), 2, RewardWeights(),
                                  torch.Generator().manual_seed(0), random.Random(0))
    finally:
        sampler.release({"first": first, "second": second})
    if parallel:  # one batch per turn with both agents' policies; no one-by-one calls
        assert fake.batches == [["first", "second"]] * 2 and fake.calls == []
    else:  # a sequential agent reads the previous agent's commit: one call each
        assert fake.batches == [] and fake.calls == ["first", "second"] * 2
    assert len(samples) == 2 * 2 * 2 * 2  # turns x episodes x agents x K


def test_the_base_weights_pushed_to_vllm_are_the_plain_models_names_and_tensors():
    from teamrl.config import LoraConfig
    from teamrl.policies.lora import attach_adapters
    from teamrl.rollout.vllm_engine import architectures, base_state_dict

    plain = tiny_policy().network
    expected = {name: tensor.clone() for name, tensor in plain.state_dict().items()}
    wrapped = attach_adapters(plain, {"x": LoraConfig(), "y": LoraConfig()})
    pushed = base_state_dict(wrapped)
    assert sorted(pushed) == sorted(expected)  # no lora_ tensors, no .base_layer. in the names
    assert all(torch.equal(pushed[name], expected[name]) for name in expected)
    assert architectures(wrapped) == ["LlamaForCausalLM"]
