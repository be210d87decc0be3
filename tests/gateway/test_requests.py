"""Requests a client can get wrong or cut short: each is a 4xx with an OpenAI error body, never a 500 or a
crash, and a client that leaves costs nothing. Every chat-completions parameter is honoured or refused
by name, as the table in docs/howto/gateway.md says."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import httpx
import openai
import pytest
import torch

from teamrl.gateway import AgentRoute, Gateway, SamplingWorker
from teamrl.gateway.parameters import NO_OP, PARAMETERS, REFUSED
from teamrl.rollout.builtin_engine import SamplingParams

DOCS = Path(__file__).resolve().parents[2] / "docs" / "howto" / "gateway.md"
USER = [{"role": "user", "content": "x"}]


def client(gateway, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0, **kw)


def post(gateway, body=None, **kw) -> httpx.Response:
    headers = {"Authorization": f"Bearer {gateway.token}", **kw.pop("headers", {})}
    return httpx.post(f"{gateway.base_url}/chat/completions", headers=headers, json=body, timeout=30, **kw)


def assert_error(response: httpx.Response, status: int, code: str, param: str | None = None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["code"] == code and error["param"] == param, error


def test_docs_table_is_the_code_table():
    rows = re.findall(r"^\| `(\w+)` \| (honoured|refused|accepted-no-op) \|", DOCS.read_text(), re.MULTILINE)
    assert dict(rows) == {name: p.status for name, p in PARAMETERS.items()}
    assert len(rows) == len(PARAMETERS)


@pytest.mark.parametrize("extra, param", [
    ({"seed": 1}, "seed"),
    ({"logit_bias": {"5": 10}}, "logit_bias"),
    ({"logprobs": True, "top_logprobs": 3}, "top_logprobs"),
    ({"response_format": "json_object"}, "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format"),
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"function_call": "auto"}, "function_call"),
    ({"frequency_penalty": 0.5}, "frequency_penalty"),
    ({"presence_penalty": -1}, "presence_penalty"),
    ({"reasoning_effort": "low"}, "reasoning_effort"),
    ({"store": True}, "store"),
    ({"n": 2}, "n"),
    ({"stream_options": {"include_usage": "yes"}}, "stream_options"),
    ({"temprature": 0.5}, "temprature"),  # a misspelt parameter is named, not ignored
])
def test_refused_parameters_are_a_400_naming_them(gateway, extra, param):
    with pytest.raises(openai.BadRequestError) as err:
        client(gateway).chat.completions.create(model="planner", messages=USER, extra_body=extra)
    assert err.value.body["param"] == param and param in err.value.body["message"]
    assert err.value.body["code"] in ("unsupported_parameter", "unknown_parameter")


def test_no_op_and_neutral_values_are_accepted(gateway):
    reply = client(gateway).chat.completions.create(
        model="planner", messages=USER, user="u1", seed=None, logit_bias={}, frequency_penalty=0, presence_penalty=0,
        response_format={"type": "text"}, tool_choice="none", store=False, metadata={"k": "v"}, top_logprobs=0,
        parallel_tool_calls=False, service_tier="auto", n=1, functions=[], function_call="none")
    assert reply.choices[0].message.content is not None
    assert {p for p, e in PARAMETERS.items() if e.status == NO_OP} >= {"user", "metadata"}
    assert {p for p, e in PARAMETERS.items() if e.status == REFUSED} >= {"seed", "logit_bias", "functions", "function_call"}


def test_logprobs_are_the_recorded_ones(gateway):
    session = gateway.sessions.open(0, frozenset(gateway.routes), max_calls=2)
    episode = openai.OpenAI(base_url=gateway.episode_url(session), api_key=session.key, max_retries=0)
    reply = episode.chat.completions.create(model="planner", messages=USER, logprobs=True)
    recorded = session.calls[0].generation
    content = reply.choices[0].logprobs.content
    assert [c.logprob for c in content] == pytest.approx(recorded.logprobs)
    assert len(content) == reply.usage.completion_tokens == len(recorded.response_ids)
    assert all(c.top_logprobs == [] for c in content)
    stream = episode.chat.completions.create(model="planner", messages=USER, logprobs=True, stream=True)
    streamed = [c for chunk in stream if chunk.choices and chunk.choices[0].logprobs
                for c in chunk.choices[0].logprobs.content]
    assert [c.logprob for c in streamed] == pytest.approx(session.calls[1].generation.logprobs)
    assert client(gateway).chat.completions.create(model="planner", messages=USER).choices[0].logprobs is None


@pytest.mark.parametrize("stop", [["a", "b", "c", "d", "e"], ["x" * 129]])
def test_stop_strings_are_capped(gateway, stop):
    assert_error(post(gateway, {"model": "planner", "messages": USER, "stop": stop}), 400, "invalid_stop", "stop")


def test_non_json_bodies_are_refused(gateway):
    body = b'{"model": "planner", "messages": [{"role": "user", "content": "x"}]}'
    assert_error(post(gateway, content=body, headers={"content-type": "text/plain"}), 415, "unsupported_media_type")
    assert post(gateway, content=body, headers={"content-type": "application/json; charset=utf-8"}).status_code == 200
    assert_error(post(gateway, [1, 2]), 422, "invalid_request")
    nan = b'{"model": "planner", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}'
    assert_error(post(gateway, content=nan), 422, "invalid_request", "temperature")
    for loose in ({"temperature": "1"}, {"stream": "yes"}, {"logprobs": 1}):  # no silent coercion
        assert_error(post(gateway, {"model": "planner", "messages": USER, **loose}), 422, "invalid_request", *loose)


def test_null_content_in_every_role_is_empty_text(gateway):
    messages = [{"role": r, "content": None} for r in ("system", "developer", "user", "assistant")] + USER
    assert post(gateway, {"model": "planner", "messages": messages}).status_code == 200


def test_an_unforeseen_error_while_reading_is_a_logged_400(gateway, monkeypatch, caplog):
    def broken(messages):
        raise TypeError("'NoneType' object is not subscriptable")

    monkeypatch.setattr(gateway.routes["planner"].policy, "encode_prompt", broken)
    with pytest.raises(openai.BadRequestError) as err:
        client(gateway).chat.completions.create(model="planner", messages=USER)
    assert err.value.body["code"] == "invalid_request" and "TypeError" in err.value.body["message"]
    assert "unexpected error while reading a request" in caplog.text


def test_a_tiny_temperature_samples_greedily_under_serve(two_policies):
    routes = {"planner": AgentRoute(two_policies["planner"], SamplingParams(max_new_tokens=8), request_sampling=True)}
    worker = SamplingWorker(torch.Generator().manual_seed(0), window_s=0.0)
    server = Gateway(routes, worker).start()
    try:
        ask = client(server).chat.completions.create
        texts = [ask(model="planner", messages=USER, **kw).choices[0].message.content
                 for kw in ({"temperature": 0}, {"temperature": 1e-300}, {"temperature": 1e-5}, {"top_p": 1e-300},
                            {"temperature": 1.5, "top_p": 5e-324})]
        assert len(set(texts)) == 1 and texts[0]
    finally:
        server.close()
        worker.close()


def _raw_request(gateway, headers: str, body: bytes) -> bytes:
    """Send a request as raw bytes; what the server answered within 10 s."""
    with socket.create_connection((gateway.host, gateway.port), timeout=10) as sock:
        sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {gateway.token}\r\n"
                     f"Content-Type: application/json\r\n{headers}\r\n".encode() + body)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                part = sock.recv(65536)
                if not part:
                    break
                answer += part
        except TimeoutError:
            pass
        return answer


def test_an_oversized_declared_body_is_refused_before_it_is_read(gateway):
    started = time.monotonic()
    answer = _raw_request(gateway, "Content-Length: 64000000\r\n", b'{"model": "planner", ')  # 64 MB promised
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"code":"request_too_large"' in answer and time.monotonic() - started < 9


def test_a_chunked_body_is_counted_while_it_is_read(gateway):
    sent = []

    def chunks():
        for _ in range(64):  # 64 x 1 MB, no Content-Length
            sent.append(1)
            yield b" " * 1_000_000

    response = post(gateway, content=chunks())
    assert_error(response, 413, "request_too_large")
    small = b'{"model": "planner", "messages": [{"role": "user", "content": "x"}]}'
    assert post(gateway, content=iter([small[:10], small[10:]])).status_code == 200


def test_a_client_that_leaves_mid_body_is_no_error(gateway, caplog):
    with socket.create_connection((gateway.host, gateway.port), timeout=10) as sock:
        sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {gateway.token}\r\n"
                     "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\": ".encode())
    time.sleep(0.5)
    assert post(gateway, {"model": "planner", "messages": USER}).status_code == 200  # still serving
    assert "unexpected error" not in caplog.text and "Traceback" not in caplog.text


def test_a_client_that_leaves_is_cancelled_and_not_recorded(two_policies):
    params = SamplingParams(temperature=1.0, max_new_tokens=4)
    routes = {"planner": AgentRoute(two_policies["planner"], params)}
    worker = SamplingWorker(torch.Generator().manual_seed(0), window_s=1.5, max_wait_s=1.5)  # held 1.5 s in queue
    server = Gateway(routes, worker).start()
    try:
        session = server.sessions.open(0, frozenset(routes), max_calls=1)
        leaving = openai.OpenAI(base_url=server.episode_url(session), api_key=session.key, max_retries=0, timeout=0.3)
        with pytest.raises(openai.APITimeoutError):
            leaving.chat.completions.create(model="planner", messages=USER)
        assert worker.wait_idle(timeout_s=10)
        time.sleep(0.2)
        assert session.calls == [] and worker.batch_sizes == []  # nothing sampled, nothing recorded
        staying = openai.OpenAI(base_url=server.episode_url(session), api_key=session.key, max_retries=0)
        staying.chat.completions.create(model="planner", messages=USER)  # max_calls=1: the slot was given back
        assert [(c.agent, c.index) for c in session.calls] == [("planner", 0)] and worker.batch_sizes == [1]
    finally:
        server.close()
        worker.close()
