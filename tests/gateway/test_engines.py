"""The gateway samples through whichever engine serves a policy (`rollout.engine`), never assuming the built-in
one: requests go to the policy's engine, its context limit is the one checked, and `teamrl serve` starts and
closes the configured engines, for a config's base models and for a checkpoint alike. A stand-in engine plays
vLLM's part here (tests/vllm runs the real one)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import httpx
import openai
import pytest
import torch
from gateway_template import CHAT_TEMPLATE

from teamrl.gateway import AgentRoute, Gateway, SamplingWorker
from teamrl.rollout import engine_routing, sampler
from teamrl.rollout.builtin_engine import SamplingParams
from toy import tiny_policy

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "gateway" / "openai_team.yaml"


class Recording:
    """A stand-in engine with a context limit of its own: records its calls, answers with built-in samples."""

    def __init__(self, max_model_len: int | None = None) -> None:
        self.max_model_len = max_model_len
        self.calls: list[tuple[str, int]] = []
        self.closed = False

    def sample(self, policy, prompts, num_samples, params, generator):
        self.calls.append((policy.name, len(prompts)))
        return engine_routing.builtin.sample(policy, prompts, num_samples, params, generator)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def served():
    """A gateway over one tiny policy that a Recording engine (context 48 tokens) serves."""
    policy = tiny_policy(seed=1, name="planner", chat_template=CHAT_TEMPLATE)
    engine = Recording(max_model_len=48)
    sampler.serve(policy, engine)
    worker = SamplingWorker(torch.Generator().manual_seed(0), window_s=0.0)
    gateway = Gateway({"planner": AgentRoute(policy, SamplingParams(max_new_tokens=8))}, worker).start()
    yield gateway, policy, engine
    gateway.close()
    worker.close()
    sampler.release({"planner": policy})


def test_requests_are_sampled_by_the_engine_that_serves_the_policy(served):
    gateway, policy, engine = served
    client = openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0)
    reply = client.chat.completions.create(model="planner", messages=[{"role": "user", "content": "hi"}],
                                           logprobs=True)
    assert engine.calls == [("planner", 1)]
    assert len(reply.choices[0].logprobs.content) == reply.usage.completion_tokens > 0


def test_the_context_limit_is_the_serving_engines_when_shorter_than_the_models(served):
    gateway, policy, engine = served
    assert policy.network.config.max_position_embeddings > 48  # the model alone would take this request
    prompt = len(policy.encode_prompt([{"role": "user", "content": "x" * 30}]))
    assert prompt + 8 > 48 >= prompt  # the prompt fits, with the response it does not
    response = httpx.post(f"{gateway.base_url}/chat/completions", headers={"Authorization": f"Bearer {gateway.token}"},
                          json={"model": "planner", "messages": [{"role": "user", "content": "x" * 30}]})
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"
    assert "context of 48" in response.json()["error"]["message"]
    assert engine.calls == []  # refused before it reached the engine
    assert engine_routing.context_length(policy) == 48
    sampler.release({"planner": policy})
    assert engine_routing.context_length(policy) == policy.network.config.max_position_embeddings


@pytest.fixture
def fake_vllm(monkeypatch):
    """`rollout.engine: vllm` loads (vLLM looks installed) and starts a Recording engine per policy."""
    real = importlib.util.find_spec
    installed = importlib.machinery.ModuleSpec("vllm", None, origin="/site-packages/vllm/__init__.py")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: installed if name == "vllm" else real(name, *a))
    engines: list[Recording] = []

    def serve_with_vllm(policies, kv_cache_gb, seed=0):
        for policy in policies.values():
            if sampler.served_by(policy) is None:
                engines.append(Recording())
                sampler.serve(policy, engines[-1])

    import teamrl.setup.team as team_setup

    monkeypatch.setattr(team_setup, "serve_with_vllm", serve_with_vllm)
    return engines


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("engines-model")
    policy = tiny_policy(seed=3, chat_template=CHAT_TEMPLATE)
    policy.network.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)
    return folder


def test_serve_starts_the_configured_engine_and_stop_serving_closes_it(fake_vllm, model_dir):
    from teamrl.gateway.serve import serve_run, stop_serving

    gateway = serve_run(CONFIG, overrides=[f"policy.model={model_dir}", "rollout.engine=vllm"])
    try:
        client = openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0)
        for agent in ("planner", "solver"):
            client.chat.completions.create(model=agent, max_tokens=3, messages=[{"role": "user", "content": "2+2?"}])
    finally:
        stop_serving(gateway)
    assert sorted(call for engine in fake_vllm for call in engine.calls) == [("planner", 1), ("solver", 1)]
    assert all(engine.closed for engine in fake_vllm) and len(fake_vllm) == 2
    assert all(sampler.served_by(route.policy) is None for route in gateway.routes.values())


def test_a_checkpoint_is_served_by_the_configured_engine_too(fake_vllm, model_dir):
    from teamrl.setup.loaded_team import Team

    with Team.from_config(CONFIG, checkpoint=model_dir) as builtin_team:  # the example's engine: builtin
        assert not fake_vllm and all(sampler.served_by(p) is None for p in builtin_team.policies.values())
    from teamrl.config import load_config

    config = load_config(CONFIG, ["rollout.engine=vllm"])
    with Team.from_config(config, checkpoint=model_dir) as team:
        assert [sampler.served_by(team.policies[name]) for name in ("planner", "solver")] == fake_vllm
    assert all(engine.closed for engine in fake_vllm)
