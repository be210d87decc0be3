"""Tool calls through the gateway with the real openai client: tools in the prompt (the policy's template or
the Hermes fallback), calls parsed from the sampled text, results sent back, every tool_choice, malformed
calls, streaming; and the training record stays the sampled token ids and log-probs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import openai
import pytest
import torch

from teamrl.gateway import AgentRoute, Gateway, SamplingWorker
from teamrl.gateway.grouping import EpisodeResult, call_sample
from teamrl.gateway.tool_calls import parse_hermes, tool_call_parser
from teamrl.policies.scoring import shared_prefix_logprobs
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from toy import tiny_policy  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_template import CHAT_TEMPLATE  # noqa: E402
from tool_kit import CLOCK, WEATHER, ScriptedSampler  # noqa: E402

ASK = [{"role": "user", "content": "Weather in Paris?"}]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TOOL_TEMPLATE = (  # a template that renders tools and tool calls itself (as Qwen's and Llama 3.1's do)
    "{% if tools %}[TOOLS]{% for t in tools %}{{ t.function.name }}:{{ t.function.parameters | tojson }};"
    "{% endfor %}\n{% endif %}{% for m in messages %}<{{ m.role }}>{{ m.content }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}[CALL {{ c.function.name }} {{ c.function.arguments | tojson }}]"
    "{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")


def serve(sampler=None, template=CHAT_TEMPLATE, max_new_tokens=12):
    policy = tiny_policy(seed=1, name="agent", chat_template=template)
    policy.network.config.max_position_embeddings = 2048  # rotary positions: the fallback tool listing is long
    worker = SamplingWorker(torch.Generator().manual_seed(0), window_s=0.0, sampler=sampler)
    server = Gateway({"agent": AgentRoute(policy, SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens))},
                     worker).start()
    return server, worker


@pytest.fixture
def scripted():
    """A gateway whose answers are scripted texts: `sampler.script.append(text)` before each request."""
    sampler = ScriptedSampler()
    server, worker = serve(sampler)
    yield server, sampler
    server.close()
    worker.close()


def episode_client(server):
    session = server.sessions.open(0, frozenset(server.routes), max_calls=8)
    return session, openai.OpenAI(base_url=server.episode_url(session), api_key=session.key, max_retries=0)


def prompt_text(server, ids):
    return server.routes["agent"].policy.tokenizer.decode(ids)


def test_a_call_and_its_result_round_trip_through_the_fallback_prompt(scripted):
    server, sampler = scripted
    session, client = episode_client(server)
    sampler.script += [f"Let me check.\n{CALL}", "It is 18C in Paris."]
    reply = client.chat.completions.create(model="agent", messages=ASK, tools=[WEATHER, CLOCK])
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me check."
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_") and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    first = prompt_text(server, sampler.prompts[0])
    assert first.startswith("<system># Tools") and json.dumps(WEATHER) in first and '"get_time"' in first

    history = ASK + [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "18C <eos> sunny"}]
    reply = client.chat.completions.create(model="agent", messages=history, tools=[WEATHER, CLOCK])
    assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.content == "It is 18C in Paris."
    assert reply.choices[0].message.tool_calls is None
    second = sampler.prompts[1]
    assert prompt_text(server, second).endswith(
        f"<assistant>Let me check.\n{CALL}\n<user><tool_response>\n18C <eos> sunny\n</tool_response>\n<assistant>")
    eos = server.routes["agent"].policy.tokenizer.eos_token_id
    assert eos not in second  # a tool result that spells a special token stays text
    assert [c.generation.prompt_ids for c in session.calls] == sampler.prompts
    assert server.tool_counts == {"calls": 1, "text": 1}


def test_the_record_is_the_sampled_ids_not_the_parsed_call(scripted):
    """The policy wrote its call without spaces; the response's arguments are re-serialised, but the Sample
    the update trains holds the sampled ids, and scoring them gives the recorded log-probs."""
    server, sampler = scripted
    session, client = episode_client(server)
    sampled = '<tool_call>{"name":"get_weather","arguments":{"city":"Rome"}}</tool_call>'
    sampler.script.append(sampled)
    reply = client.chat.completions.create(model="agent", messages=ASK, tools=[WEATHER])
    assert reply.choices[0].message.tool_calls[0].function.arguments == '{"city": "Rome"}'
    generation = session.calls[0].generation
    policy = server.routes["agent"].policy
    assert policy.tokenizer.decode(generation.response_ids[:-1]) == sampled
    sample = call_sample(session.calls[0], EpisodeResult(1.0), 0, 0, {"agent": "agent"}, {"agent": "agent"},
                         RewardWeights(), committed=True)
    assert sample.generation.response_ids == generation.response_ids
    assert sample.generation.prompt_ids == sampler.prompts[0]
    with torch.no_grad():
        logp, mask, _ = shared_prefix_logprobs(policy.model, [sample.generation.prompt_ids],
                                               [sample.generation.response_ids], [0], policy.tokenizer.pad_token_id)
    assert logp[0][mask[0].bool()].tolist() == pytest.approx(generation.logprobs, abs=1e-5)


def test_sampled_ids_and_logprobs_with_tools_in_the_prompt_are_what_the_update_scores():
    server, worker = serve(max_new_tokens=8)  # the real engine: the tiny model writes no valid call
    try:
        session, client = episode_client(server)
        reply = client.chat.completions.create(model="agent", messages=ASK, tools=[WEATHER], logprobs=True)
        generation = session.calls[0].generation
        policy = server.routes["agent"].policy
        assert "<tools>" in prompt_text(server, generation.prompt_ids)
        assert [c.logprob for c in reply.choices[0].logprobs.content] == pytest.approx(generation.logprobs)
        with torch.no_grad():
            logp, mask, _ = shared_prefix_logprobs(policy.model, [generation.prompt_ids], [generation.response_ids],
                                                   [0], policy.tokenizer.pad_token_id, generation.temperature)
        assert logp[0][mask[0].bool()].tolist() == pytest.approx(generation.logprobs, abs=1e-4)
    finally:
        server.close()
        worker.close()


@pytest.mark.parametrize("choice, script, finish, outcome", [
    ("auto", "No tool needed.", "stop", "text"),
    ("required", "I will not call.", "stop", "missing_required"),
    ("required", CALL, "tool_calls", "calls"),
    ({"type": "function", "function": {"name": "get_weather"}}, CALL, "tool_calls", "calls"),
    ({"type": "function", "function": {"name": "get_time"}}, CALL, "stop", "malformed"),  # not the named one
    ({"type": "function", "function": {"name": "get_time"}}, "no call", "stop", "missing_required"),
])
def test_every_tool_choice(scripted, choice, script, finish, outcome):
    server, sampler = scripted
    sampler.script.append(script)
    reply = openai.OpenAI(base_url=server.base_url, api_key=server.token, max_retries=0).chat.completions.create(
        model="agent", messages=ASK, tools=[WEATHER, CLOCK], tool_choice=choice)
    assert reply.choices[0].finish_reason == finish and server.tool_counts == {outcome: 1}
    message = reply.choices[0].message
    assert (message.tool_calls is None) == (finish == "stop")
    if finish == "stop":
        assert message.content == script  # returned as written: no call made up
    prompt = prompt_text(server, sampler.prompts[0])
    if isinstance(choice, dict):
        named = choice["function"]["name"]
        assert f"You must call the function {named}." in prompt
        assert ('"get_weather"' in prompt) == (named == "get_weather")  # only the named function is shown
    elif choice == "required":
        assert "You must call at least one function." in prompt


def test_tool_choice_none_shows_no_tools_and_reads_no_calls(scripted):
    server, sampler = scripted
    sampler.script.append(CALL)
    reply = openai.OpenAI(base_url=server.base_url, api_key=server.token, max_retries=0).chat.completions.create(
        model="agent", messages=ASK, tools=[WEATHER], tool_choice="none")
    assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.content == CALL
    assert reply.choices[0].message.tool_calls is None and server.tool_counts == {}
    assert prompt_text(server, sampler.prompts[0]) == "<user>Weather in Paris?\n<assistant>"


@pytest.mark.parametrize("script, extra", [
    ('<tool_call>{"name": "get_weather", "arguments": {"city": </tool_call>', {}),  # bad JSON
    ('<tool_call>{"name": "send_mail", "arguments": {}}</tool_call>', {}),  # a function not offered
    ('<tool_call>{"name": "get_weather", "arguments": "Paris"}</tool_call>', {}),  # arguments not an object
    ('<tool_call>{"name": "get_weather", "arguments": {}}', {}),  # never closed
    (CALL + CALL, {"parallel_tool_calls": False}),  # two calls where one was allowed
])
def test_a_malformed_call_is_text_and_counted(scripted, script, extra):
    server, sampler = scripted
    sampler.script.append(script)
    reply = openai.OpenAI(base_url=server.base_url, api_key=server.token, max_retries=0).chat.completions.create(
        model="agent", messages=ASK, tools=[WEATHER], **extra)
    assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.content == script
    assert reply.choices[0].message.tool_calls is None and server.tool_counts == {"malformed": 1}


def test_parallel_calls_come_in_order(scripted):
    server, sampler = scripted
    clock = '<tool_call>\n{"name": "get_time"}\n</tool_call>'
    sampler.script.append(CALL + "\n" + clock)
    reply = openai.OpenAI(base_url=server.base_url, api_key=server.token, max_retries=0).chat.completions.create(
        model="agent", messages=ASK, tools=[WEATHER, CLOCK])
    calls = reply.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_time"] and reply.choices[0].message.content is None
    assert json.loads(calls[1].function.arguments) == {} and calls[0].id != calls[1].id


def test_the_same_answer_to_the_same_prompt_gets_the_same_call_ids(scripted):
    """A replayed run is answered from its record: its calls must carry the ids its program saw the first time."""
    server, sampler = scripted
    client = openai.OpenAI(base_url=server.base_url, api_key=server.token, max_retries=0)
    sampler.script += [CALL, CALL, CALL]
    ids = [client.chat.completions.create(model="agent", messages=messages, tools=[WEATHER]).choices[0]
           .message.tool_calls[0].id for messages in (ASK, ASK, [{"role": "user", "content": "Weather in Rome?"}])]
    assert ids[0] == ids[1] != ids[2]


def test_streamed_tool_calls_join_to_the_unstreamed_message(scripted):
    server, sampler = scripted
    client = openai.OpenAI(base_url=server.base_url, api_key=server.token, max_retries=0)
    for stream in (False, True):
        sampler.script.append(f"Checking.\n{CALL}")
        reply = client.chat.completions.create(model="agent", messages=ASK, tools=[WEATHER], stream=stream)
        if not stream:
            plain = reply.choices[0]
            continue
        chunks = [c for c in reply if c.choices]
        content = "".join(c.choices[0].delta.content or "" for c in chunks)
        deltas = [d for c in chunks for d in c.choices[0].delta.tool_calls or []]
        assert content == plain.message.content and [d.index for d in deltas] == [0]
        assert deltas[0].function.name == "get_weather" and deltas[0].type == "function"
        assert deltas[0].function.arguments == plain.message.tool_calls[0].function.arguments
        assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_template_with_tool_support_renders_them_itself():
    sampler = ScriptedSampler("Done.", "Done.")
    server, worker = serve(sampler, template=TOOL_TEMPLATE)
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key=server.token, max_retries=0)
        history = ASK + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "-3C"}]
        client.chat.completions.create(model="agent", messages=history, tools=[WEATHER])
        tokenizer = server.routes["agent"].policy.tokenizer
        expected = ('[TOOLS]get_weather:' + json.dumps(WEATHER["function"]["parameters"]) + ';<user>Weather in Paris?'
                    '<assistant>[CALL get_weather {"city": "Oslo"}]<tool>-3C<assistant>')  # trim_blocks eats newlines
        assert tokenizer.decode(sampler.prompts[0]) == expected  # arguments rendered as an object
        assert sampler.prompts[0] == tokenizer(expected, add_special_tokens=False)["input_ids"]
        forged = dict(WEATHER, function=dict(WEATHER["function"], description="ends <eos> here"))
        with pytest.raises(openai.BadRequestError) as err:  # the template would render <eos> as a real token
            client.chat.completions.create(model="agent", messages=ASK, tools=[forged])
        assert err.value.body["code"] == "invalid_messages" and "<eos>" in err.value.body["message"]
    finally:
        server.close()
        worker.close()


@pytest.mark.parametrize("extra, param, code", [
    ({"functions": [{"name": "f", "parameters": {}}]}, "functions", "unsupported_parameter"),
    ({"function_call": "auto"}, "function_call", "unsupported_parameter"),
    ({"tools": [{"type": "code_interpreter"}]}, "tools[0]", "invalid_tools"),
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0]", "invalid_tools"),
    ({"tools": [WEATHER, WEATHER]}, "tools", "invalid_tools"),
    ({"tools": [{"type": "function", "function": {**WEATHER["function"], "strict": True}}]}, "tools[0]", "invalid_tools"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice",
     "invalid_tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "always"}, "tool_choice", "invalid_tool_choice"),
    ({"tool_choice": "required"}, "tool_choice", "invalid_tool_choice"),  # no tools to call
])
def test_bad_tool_requests_are_400s_naming_the_problem(scripted, extra, param, code):
    server, _ = scripted
    with pytest.raises(openai.BadRequestError) as err:
        openai.OpenAI(base_url=server.base_url, api_key=server.token, max_retries=0).chat.completions.create(
            model="agent", messages=ASK, extra_body=extra)
    assert err.value.body["param"] == param and err.value.body["code"] == code
    if param in ("functions", "function_call"):
        assert "tool" in err.value.body["message"]  # points to tools / tool_choice


@pytest.mark.parametrize("message, code", [
    ({"role": "tool", "content": "18C"}, "invalid_tool_message"),  # no tool_call_id
    ({"role": "assistant", "content": "", "function_call": {"name": "f", "arguments": "{}"}}, "unsupported_message"),
    ({"role": "assistant", "content": "", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": {}}}]},
     "invalid_tool_calls"),  # arguments must be a JSON string
    ({"role": "user", "content": "x", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{}"}}]},
     "invalid_tool_calls"),
])
def test_bad_tool_messages_are_400s(scripted, message, code):
    server, _ = scripted
    with pytest.raises(openai.BadRequestError) as err:
        openai.OpenAI(base_url=server.base_url, api_key=server.token, max_retries=0).chat.completions.create(
            model="agent", messages=[*ASK, message])
    assert err.value.body["code"] == code


def test_parser_registry_names_the_registered_parsers():
    assert tool_call_parser("hermes") is parse_hermes
    with pytest.raises(ValueError, match="registered: hermes"):
        tool_call_parser("mistral_v9")
    with pytest.raises(ValueError, match="registered: hermes"):
        AgentRoute(tiny_policy(), SamplingParams(), tool_parser="mistral_v9")


def weather_agent(instance, endpoint):
    """Asks with a tool; runs the call it gets and sends the result back; rewarded for the final answer."""
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    messages = [{"role": "user", "content": f"Weather in city {instance['index']}?"}]
    reply = client.chat.completions.create(model="agent", messages=messages, tools=[WEATHER]).choices[0]
    if reply.finish_reason != "tool_calls":
        return 0.0
    messages.append(reply.message.model_dump(exclude_none=True))
    for call in reply.message.tool_calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "18C"})
    final = client.chat.completions.create(model="agent", messages=messages, tools=[WEATHER]).choices[0]
    return 1.0 if "18C" in (final.message.content or "") else 0.0


def test_a_program_that_calls_tools_trains_on_the_sampled_calls():
    from teamrl.gateway import ProgramSettings, ProgramWorkflow
    from teamrl.rollout.tree import run_episodes

    sampler = ScriptedSampler(respond=lambda prompt: "It is 18C." if "<tool_response>\n18C" in prompt else CALL)
    server, worker = serve(sampler)
    wf = ProgramWorkflow(ProgramSettings(entry=f"{__file__}:weather_agent", agents=["agent"], branching="independent",
                                         check_determinism=False), max_turns=4)
    wf.gateway = server  # the scripted server: the workflow points its routes at the policies below
    policy = server.routes["agent"].policy
    try:
        samples, episodes = run_episodes(wf, [0, 1], "train", {"agent": policy}, {"agent": "agent"},
                                         SamplingParams(temperature=1.0, max_new_tokens=12), 2, RewardWeights(),
                                         torch.Generator().manual_seed(0), __import__("random").Random(0))
    finally:
        wf.close()
        worker.close()
    assert [e.team_return for e in episodes] == [1.0] * 4 and len(samples) == 8
    texts = sorted(policy.tokenizer.decode(s.generation.response_ids[:-1]) for s in samples)
    assert texts == [CALL] * 4 + ["It is 18C."] * 4  # what was sampled, call blocks included
    assert {s.tree_key[1] for s in samples} == {0, 1}
    metrics = wf.metrics()
    assert metrics["gateway/tool_calls/calls"] == 4 and metrics["gateway/tool_calls/text"] == 4
