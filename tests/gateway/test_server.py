"""The real openai client against the real server: answers, streaming, routing, errors."""

from __future__ import annotations

import httpx
import openai
import pytest


def client(gateway, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0, **kw)


def test_chat_completion_answers_with_the_sampled_text(gateway):
    reply = client(gateway).chat.completions.create(
        model="planner", messages=[{"role": "user", "content": "plan 2+2"}], max_tokens=5)
    assert reply.choices[0].message.role == "assistant"
    assert reply.model == "planner"
    assert 1 <= reply.usage.completion_tokens <= 5
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert gateway.host == "127.0.0.1" and gateway.port > 0


def test_streaming_concatenates_to_one_answer(gateway):
    stream = client(gateway).chat.completions.create(
        model="solver", messages=[{"role": "user", "content": "go"}], stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish and finish[-1] in ("stop", "length")
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
    assert isinstance(text, str)


def test_raw_stream_ends_with_done(gateway):
    response = httpx.post(f"{gateway.base_url}/chat/completions", headers={"Authorization": f"Bearer {gateway.token}"},
                          json={"model": "solver", "messages": [{"role": "user", "content": "x"}], "stream": True})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.rstrip().endswith("data: [DONE]")


def test_models_lists_the_agents(gateway):
    assert [m.id for m in client(gateway).models.list()] == ["planner", "solver"]


def test_header_names_the_agent(gateway, monkeypatch):
    asked = []
    original = gateway.worker.submit
    monkeypatch.setattr(gateway.worker, "submit",
                        lambda policy, *a, **kw: asked.append(policy.name) or original(policy, *a, **kw))
    httpx.post(f"{gateway.base_url}/chat/completions",
               headers={"Authorization": f"Bearer {gateway.token}", "X-Teamrl-Agent": "solver"},
               json={"model": "planner", "messages": [{"role": "user", "content": "x"}]}).raise_for_status()
    client(gateway).chat.completions.create(model="planner", messages=[{"role": "user", "content": "y"}])
    assert asked == ["solver", "planner"]


def test_wrong_key_is_401(gateway):
    with pytest.raises(openai.AuthenticationError) as err:
        openai.OpenAI(base_url=gateway.base_url, api_key="nope", max_retries=0).models.list()
    assert err.value.body["code"] == "invalid_api_key"
    assert httpx.get(f"{gateway.base_url}/models").status_code == 401


def test_unknown_agent_is_404_naming_the_agents(gateway):
    with pytest.raises(openai.NotFoundError) as err:
        client(gateway).chat.completions.create(model="critic", messages=[{"role": "user", "content": "x"}])
    assert "planner, solver" in err.value.body["message"]


@pytest.mark.parametrize("body, status, code", [
    ({"model": "planner", "messages": []}, 422, "invalid_request"),
    ({"model": "planner"}, 422, "invalid_request"),
    ({"model": "planner", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, 422, "invalid_request"),
    ({"model": "planner", "messages": [{"role": "user", "content": "x"}], "n": 2}, 400, "unsupported_parameter"),
    ({"model": "planner", "messages": [{"role": "tool", "content": "x"}]}, 400, "invalid_tool_message"),
    ({"model": "planner", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, 400,
     "invalid_tools"),
    ({"model": "planner", "messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_object"}}, 400, "unsupported_parameter"),
    ({"model": "planner", "messages": [{"role": "user", "content": "x" * 2001}]}, 400, "context_length_exceeded"),
    ({"model": "planner", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
     "unsupported_content"),
])
def test_malformed_requests_get_openai_error_bodies(gateway, body, status, code):
    response = httpx.post(f"{gateway.base_url}/chat/completions",
                          headers={"Authorization": f"Bearer {gateway.token}"}, json=body)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert set(response.json()["error"]) >= {"message", "type", "code"}


def test_invalid_json_and_unknown_route(gateway):
    headers = {"Authorization": f"Bearer {gateway.token}", "content-type": "application/json"}
    assert httpx.post(f"{gateway.base_url}/chat/completions", headers=headers, content=b"{not json").status_code == 422
    missing = httpx.get(f"http://127.0.0.1:{gateway.port}/v2/nothing", headers=headers)
    assert missing.status_code == 404 and "error" in missing.json()


def test_max_tokens_is_capped_by_the_agents_setting(gateway):
    reply = client(gateway).chat.completions.create(
        model="planner", messages=[{"role": "user", "content": "x"}], max_tokens=500, stop=None)
    assert reply.usage.completion_tokens <= 12


def test_episode_routes_take_only_their_own_key_and_record_their_calls(gateway):
    one = gateway.sessions.open(0, frozenset(gateway.routes), max_calls=1)
    two = gateway.sessions.open(0, frozenset(gateway.routes), max_calls=1)
    body = {"model": "planner", "messages": [{"role": "user", "content": "x"}]}
    url = gateway.episode_url(one) + "/chat/completions"
    assert httpx.post(url, headers={"Authorization": f"Bearer {two.key}"}, json=body).status_code == 401
    assert httpx.post(url, headers={"Authorization": f"Bearer {gateway.token}"}, json=body).status_code == 401
    ok = openai.OpenAI(base_url=gateway.episode_url(one), api_key=one.key, max_retries=0)
    ok.chat.completions.create(**body)
    assert [(c.agent, c.index) for c in one.calls] == [("planner", 0)] and two.calls == []
    with pytest.raises(openai.BadRequestError) as err:  # max_calls=1: the planner's second call
        ok.chat.completions.create(**body)
    assert err.value.body["code"] == "call_limit"
    gateway.sessions.close(one)
    with pytest.raises(openai.NotFoundError):
        ok.chat.completions.create(model="solver", messages=body["messages"])


def test_batching_window_restarts_with_every_arrival_and_delivery():
    """Requests 30 ms apart stay in one batch under a 200 ms window (counted from the first request they
    were split); a delivered answer holds the window open too; max_wait_s bounds the wait."""
    import threading
    import time

    import torch

    from teamrl.gateway import SamplingWorker
    from teamrl.rollout.builtin_engine import Generation, SamplingParams

    def fake(policy, prompts, n, params, generator):
        return [[Generation(p, [], [], [], "x", True)] for p in prompts]

    def submit_spaced(worker: SamplingWorker, count: int, gap_s: float) -> None:
        futures = []
        for _ in range(count):
            futures.append(worker.submit(None, SamplingParams(), [1]))
            time.sleep(gap_s)
        for future in futures:
            future.result(timeout=5)

    worker = SamplingWorker(torch.Generator(), window_s=0.2, sampler=fake, max_wait_s=5.0)
    try:
        submit_spaced(worker, 4, 0.03)
        assert worker.batch_sizes == [4]
        deliveries = threading.Thread(target=lambda: [time.sleep(0.1) or worker.delivered() for _ in range(4)])
        deliveries.start()
        first = worker.submit(None, SamplingParams(), [1])
        time.sleep(0.45)  # past the window of the first request, not past that of the last delivery
        second = worker.submit(None, SamplingParams(), [1])
        first.result(timeout=5), second.result(timeout=5)
        deliveries.join()
        assert worker.batch_sizes == [4, 2]
    finally:
        worker.close()
    capped = SamplingWorker(torch.Generator(), window_s=0.2, sampler=fake, max_wait_s=0.1)
    try:
        submit_spaced(capped, 6, 0.06)
        assert len(capped.batch_sizes) > 1 and sum(capped.batch_sizes) == 6  # at most 100 ms per batch
    finally:
        capped.close()


def test_batching_waits_grow_with_the_last_engine_call():
    """After a long engine call (a real model's decode) a straggler 60 ms behind the others joins their
    batch; after a short one (the tiny model) the configured 20 ms window splits them."""
    import time

    import torch

    from teamrl.gateway import SamplingWorker
    from teamrl.rollout.builtin_engine import Generation, SamplingParams

    def fake(policy, prompts, n, params, generator):
        return [[Generation(p, [], [], [], "x", True)] for p in prompts]

    def one_turn(worker: SamplingWorker) -> list[int]:
        before = len(worker.batch_sizes)
        futures = [worker.submit(None, SamplingParams(), [1]) for _ in range(3)]
        time.sleep(0.06)
        futures.append(worker.submit(None, SamplingParams(), [1]))
        for future in futures:
            future.result(timeout=5)
        return worker.batch_sizes[before:]

    worker = SamplingWorker(torch.Generator(), window_s=0.02, sampler=fake)
    try:
        assert one_turn(worker) == [3, 1]  # the fake's calls take microseconds: 20 ms decides
        worker.last_call_s = 5.0  # as if the last decode took 5 s: window 100 ms, cap 500 ms
        time.sleep(0.05)  # the worker is idle, waiting for a first request: it reads last_call_s then
        assert one_turn(worker) == [4]
    finally:
        worker.close()
