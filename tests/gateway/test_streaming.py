"""Token streaming: `stream: true` sends each row's text as the batched decode draws it, and what it sends
joins to exactly the answer without streaming; the recorded ids and log-probs do not change."""

from __future__ import annotations

import threading

import openai
import pytest
import torch

from teamrl.gateway import AgentRoute, Gateway, GatewayLimits, SamplingWorker
from teamrl.gateway.streaming import StreamText, stop_hold, without_stop
from teamrl.rollout import builtin_engine
from teamrl.rollout.builtin_engine import SamplingParams

ASK = [{"role": "user", "content": "tell me a long story"}]


@pytest.fixture
def fresh(two_policies):
    """fresh(): a new gateway over the same policies whose sampler starts from seed 0 (closed afterwards)."""
    made = []

    def make(max_new_tokens: int = 40) -> Gateway:
        params = SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens)
        routes = {name: AgentRoute(policy, params) for name, policy in two_policies.items()}
        worker = SamplingWorker(torch.Generator().manual_seed(0), window_s=0.0)
        server = Gateway(routes, worker, GatewayLimits(max_message_chars=2000)).start()
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()
        server.worker.close()


def episode_call(gateway: Gateway, stream: bool, **kw):
    """One call through an episode session: (the reply or the list of chunks, the recorded Generation)."""
    session = gateway.sessions.open(0, frozenset(gateway.routes), max_calls=2)
    client = openai.OpenAI(base_url=gateway.episode_url(session), api_key=session.key, max_retries=0)
    reply = client.chat.completions.create(model="solver", messages=ASK, stream=stream, **kw)
    if stream:
        reply = list(reply)
    (call,) = session.calls
    return reply, call.generation


def deltas(chunks) -> list[str]:
    return [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]


def test_streamed_deltas_join_to_the_unstreamed_answer_and_record_the_same_tokens(fresh):
    reply, plain = episode_call(fresh(), stream=False, logprobs=True)
    chunks, streamed = episode_call(fresh(), stream=True, logprobs=True)
    text = reply.choices[0].message.content
    assert len(plain.response_ids) >= 20, "the seed should give a long answer"
    assert "".join(deltas(chunks)) == text == plain.text
    assert len(deltas(chunks)) > 1  # the text came in pieces, not whole at the end
    assert streamed.response_ids == plain.response_ids and streamed.prompt_ids == plain.prompt_ids
    assert streamed.logprobs == plain.logprobs and streamed.sampler_logprobs == plain.sampler_logprobs
    logprobs = [c.logprob for chunk in chunks if chunk.choices and chunk.choices[0].logprobs
                for c in chunk.choices[0].logprobs.content]
    assert logprobs == pytest.approx(plain.logprobs)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == [reply.choices[0].finish_reason]


def test_the_first_text_arrives_before_the_decode_ends(fresh, monkeypatch):
    """The decode's sixth step waits until the client holds a text delta: it only can if deltas are sent
    while the decode runs (sent at the end, the wait would time out and the check fail)."""
    delta_seen, steps, waited = threading.Event(), [], []
    real_choose = builtin_engine._choose

    def choose(*args, **kw):
        steps.append(len(steps))
        if len(steps) == 6:
            waited.append(delta_seen.wait(timeout=10))
        return real_choose(*args, **kw)

    monkeypatch.setattr(builtin_engine, "_choose", choose)
    gateway = fresh()
    client = openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0)
    order = []
    for chunk in client.chat.completions.create(model="solver", messages=ASK, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            order.append(("delta", len(steps)))
            delta_seen.set()
    assert waited == [True]  # the client had a delta when step 6 began
    assert order[0][1] < len(steps)  # ...and the first one came while steps were still to be drawn
    assert len(steps) > 6


def test_a_stop_string_never_appears_in_the_stream(fresh):
    free, _ = episode_call(fresh(), stream=False)
    text = free.choices[0].message.content
    stop = text[6:8]  # a string the seed's answer writes: the same draws stop there
    reply, plain = episode_call(fresh(), stream=False, stop=[stop])
    chunks, streamed = episode_call(fresh(), stream=True, stop=[stop])
    content = reply.choices[0].message.content
    assert content == text[: text.index(stop)]  # the answer ends before the stop string (OpenAI's rule)
    assert plain.text == text[: text.index(stop) + len(stop)]  # the record keeps it: it was sampled and is trained
    assert all(stop not in d for d in deltas(chunks)) and stop not in "".join(deltas(chunks))
    assert "".join(deltas(chunks)) == content
    assert streamed.response_ids == plain.response_ids and streamed.logprobs == plain.logprobs


def test_usage_chunk_when_asked(fresh):
    chunks, generation = episode_call(fresh(), stream=True, stream_options={"include_usage": True})
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == len(generation.response_ids)
    assert chunks[-1].usage.prompt_tokens == len(generation.prompt_ids)
    assert all(c.usage is None for c in chunks[:-1])
    chunks, _ = episode_call(fresh(), stream=True)
    assert all(c.usage is None for c in chunks)


def test_streams_of_one_batch_are_fed_together(fresh):
    """Two streamed requests in one batch each get their own row's text."""
    gateway = fresh()
    gateway.worker.flush_at, gateway.worker.window_s, gateway.worker.max_wait_s = 2, 5.0, 5.0
    client = openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0)
    texts: dict[str, str] = {}

    def ask(agent: str) -> None:
        chunks = list(client.chat.completions.create(model=agent, messages=ASK, stream=True))
        texts[agent] = "".join(deltas(chunks))

    threads = [threading.Thread(target=ask, args=(a,)) for a in ("planner", "solver")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert gateway.worker.batch_sizes == [1, 1]  # two policies: two requests of one engine call each
    assert set(texts) == {"planner", "solver"} and texts["planner"] != texts["solver"]


# ---- the hold-back rules, on a byte-level "tokenizer" (one token per UTF-8 byte) ---------------------------
def byte_decode(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


def feed(text: StreamText, ids: list[int]) -> list[str]:
    return [d for d in (text.add([i]) for i in ids) if d]


def test_a_character_split_over_tokens_is_sent_whole():
    words = "héllo 世界 🎉 ok"
    ids = list(words.encode())
    text = StreamText(byte_decode, stop_ids=set())
    sent = feed(text, ids)
    assert all("\ufffd" not in d for d in sent) and "".join(sent) == words
    assert "世界" in sent or any("界" in d for d in sent) and len(sent) > 5
    assert text.finish(words) == ""


def test_a_possible_stop_string_is_held_back_until_it_is_not_one():
    stops = ["STOP"]
    answer = "a STep then a STOP and more"
    text = StreamText(byte_decode, stop_ids=set(), stops=stops)
    sent = feed(text, list(answer.encode()))
    assert "".join(sent) == "a STep then a "  # nothing from the stop string on
    assert all("STO" not in d for d in sent)
    assert text.finish(without_stop(answer[: answer.index("STOP") + 4], stops)) == ""
    assert stop_hold("xx ST", stops) == 3 and stop_hold("xx STOP yy", stops) == 3


def test_a_stop_token_ends_the_text():
    text = StreamText(byte_decode, stop_ids={0}, stops=())
    assert feed(text, [104, 105, 0, 106]) == ["h", "i"] and text.ended


def test_a_space_the_tokenizer_may_clean_up_is_held():
    text = StreamText(lambda ids: "".join(map(chr, ids)).replace(" .", "."), stop_ids=set(), hold_space=True)
    assert feed(text, [ord(c) for c in "a b ."]) == ["a", " b", "."]


def test_a_client_that_leaves_mid_stream_is_not_recorded(fresh, monkeypatch):
    """The decode's fourth step waits until the server has given the call index back (the client left after
    its first text): the answer is then drawn whole but never recorded."""
    import httpx

    gateway = fresh(max_new_tokens=60)
    session = gateway.sessions.open(0, frozenset(gateway.routes), max_calls=1)
    released, steps = [], []
    real_choose = builtin_engine._choose

    def choose(*args, **kw):
        steps.append(1)
        if len(steps) == 4:
            for _ in range(200):
                if session._counts.get("solver") == 0:  # released: the server saw the client leave
                    break
                threading.Event().wait(0.05)
            released.append(session._counts.get("solver") == 0)
        return real_choose(*args, **kw)

    monkeypatch.setattr(builtin_engine, "_choose", choose)
    body = {"model": "solver", "messages": ASK, "stream": True}
    with httpx.stream("POST", f"{gateway.episode_url(session)}/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {session.key}"}) as response:
        for line in response.iter_lines():
            if '"content": "' in line and '"content": ""' not in line:
                break  # the first text: leave
    assert gateway.worker.wait_idle(20)
    assert released == [True] and len(steps) > 4
    assert session.calls == [] and session.next_index("solver") == 0
