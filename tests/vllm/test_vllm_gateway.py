"""The OpenAI-compatible gateway on the vLLM engine: `teamrl serve CONFIG.yaml` with `rollout.engine: vllm` on
SmolLM2-135M-Instruct (a LoRA adapter per role on one base, both served by one engine), asked with the real
`openai` client: a chat completion, a tool call round trip, a streamed answer with a stop string. The calls an
episode records keep the ids vLLM sampled and its log-probs, which the trainer's forward reproduces."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import openai
import pytest
import torch

from teamrl.gateway.serve import serve_run, stop_serving
from teamrl.policies.scoring import pack_responses, response_logprobs
from teamrl.rollout import engine_routing, sampler
from teamrl.rollout.vllm_engine import VllmEngine

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "gateway" / "openai_team.yaml"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ATOL = 1e-4  # float32 on both sides: trainer and vLLM agree to ~1e-6 per token


@pytest.fixture(scope="module")
def gateway(smollm2):
    served = serve_run(CONFIG, overrides=[f"policy.model={smollm2}", "rollout.engine=vllm",
                                          "rollout.vllm_kv_cache_gb=0.5", "rollout.max_new_tokens=48",
                                          "policy.lora={r: 2, alpha: 4, target_modules: [q_proj, v_proj]}",
                                          "train.threads=1"])
    yield served
    stop_serving(served)
    assert not sampler._SERVED  # the engine was closed


def client_of(gateway, session=None) -> openai.OpenAI:
    if session is None:
        return openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0)
    return openai.OpenAI(base_url=gateway.episode_url(session), api_key=session.key, max_retries=0)


def trainer_logprobs(policy, generation) -> torch.Tensor:
    """The trainer's forward of the recorded ids, at the temperature their log-probs were recorded under."""
    batch = pack_responses([generation.prompt_ids], [generation.response_ids], policy.tokenizer.pad_token_id)
    with torch.no_grad():
        logp, _ = response_logprobs(policy.model, batch, temperature=generation.temperature or 1.0)
    return logp[0, : len(generation.response_ids)]


def test_both_roles_are_lora_adapters_served_by_one_vllm_engine(gateway):
    planner, solver = (gateway.routes[a].policy for a in ("planner", "solver"))
    assert planner.adapter == "planner" and solver.adapter == "solver" and planner.network is solver.network
    assert isinstance(sampler.served_by(planner), VllmEngine) and sampler.served_by(planner) is sampler.served_by(solver)


def test_a_chat_completion_records_the_ids_and_logprobs_vllm_sampled(gateway):
    session = gateway.sessions.open(0, frozenset(gateway.routes), max_calls=4)
    client = client_of(gateway, session)
    messages = [{"role": "user", "content": "What is 2+2? Answer in one sentence."}]
    greedy = client.chat.completions.create(model="planner", messages=messages, temperature=0, max_tokens=24,
                                            logprobs=True)
    sampled = client.chat.completions.create(model="solver", messages=messages, temperature=1.0, max_tokens=24,
                                             logprobs=True)
    assert greedy.choices[0].message.content.strip() and greedy.model == "planner"
    calls = {call.agent: call.generation for call in session.calls}
    for reply, agent in ((greedy, "planner"), (sampled, "solver")):
        generation, policy = calls[agent], gateway.routes[agent].policy
        shown = reply.choices[0].logprobs.content
        assert len(shown) == reply.usage.completion_tokens == len(generation.response_ids) > 0
        assert [t.logprob for t in shown] == pytest.approx(generation.logprobs, abs=1e-6)
        assert policy.tokenizer.decode(generation.response_ids, skip_special_tokens=True) == \
            reply.choices[0].message.content
        assert generation.prompt_ids == policy.encode_prompt(messages)  # the template teamrl applied
        gap = (trainer_logprobs(policy, generation) - torch.tensor(generation.logprobs)).abs().max()
        assert gap < ATOL, (agent, float(gap))
    # Greedy on vLLM picks what the built-in engine picks from the same weights (float32: no near-ties here).
    planner = gateway.routes["planner"].policy
    params = dataclasses.replace(gateway.routes["planner"].params, temperature=0.0, top_p=1.0, max_new_tokens=24)
    builtin = engine_routing.builtin.sample(planner, [calls["planner"].prompt_ids], 1, params,
                                            torch.Generator().manual_seed(0))[0][0]
    assert builtin.response_ids == calls["planner"].response_ids


def test_a_tool_call_round_trip(gateway):
    """Three worked calls in the history, then a fourth city: SmolLM2 writes the call itself (greedy), the
    gateway hands it back as `tool_calls`, the result goes in as a tool message, and the model answers."""
    def call(i: int, city: str) -> list[dict]:
        return [{"role": "assistant", "content": None, "tool_calls": [{
                    "id": f"call_{i}", "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}]},
                {"role": "tool", "tool_call_id": f"call_{i}", "content": f"{10 + i}C"}]

    messages = [m for i, city in enumerate(("Rome", "Oslo", "Madrid"))
                for m in [{"role": "user", "content": f"Weather in {city}?"}, *call(i, city)]]
    messages.append({"role": "user", "content": "Weather in Paris?"})
    session = gateway.sessions.open(1, frozenset(gateway.routes), max_calls=4)
    client = client_of(gateway, session)
    first = client.chat.completions.create(model="solver", messages=messages, tools=[WEATHER], temperature=0,
                                           max_tokens=40)
    assert first.choices[0].finish_reason == "tool_calls", first.choices[0].message
    made = first.choices[0].message.tool_calls
    assert len(made) == 1 and made[0].function.name == "get_weather"
    assert json.loads(made[0].function.arguments) == {"city": "Paris"}
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": made[0].id, "content": "18C, cloudy"}]
    second = client.chat.completions.create(model="solver", messages=messages, tools=[WEATHER], temperature=0,
                                            max_tokens=40)
    assert second.choices[0].finish_reason in ("stop", "tool_calls")
    assert second.choices[0].message.content or second.choices[0].message.tool_calls
    recorded = [call.generation for call in session.calls]
    assert len(recorded) == 2
    solver = gateway.routes["solver"].policy
    text = solver.tokenizer.decode(recorded[0].response_ids, skip_special_tokens=True)
    assert "<tool_call>" in text and '"Paris"' in text  # the record keeps the sampled ids, not the parsed call
    assert "18C, cloudy" in solver.tokenizer.decode(recorded[1].prompt_ids)  # the result reached the prompt


def test_a_streamed_answer_ends_at_its_stop_string_as_the_whole_answer_does(gateway):
    client = client_of(gateway)
    request = dict(model="planner", messages=[{"role": "user", "content": "Count from 1 to 10, separated by commas."}],
                   max_tokens=30, stop=["5"], temperature=0, logprobs=True)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **request))
    whole = client.chat.completions.create(**request)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content and text.endswith("5")  # the stop string is kept
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    shown = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    assert chunks[-1].usage.completion_tokens == len(shown) == whole.usage.completion_tokens
    assert "".join(t.token for t in shown) == text
