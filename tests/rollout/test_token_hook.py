"""The decode loop's token hook (`on_tokens`): it hands out exactly the tokens each row draws, step by step,
and changes nothing that is sampled or recorded."""

import torch

from teamrl.rollout import builtin_engine as engine
from teamrl.rollout.builtin_engine import SamplingParams, sample, sample_together
from teamrl.rollout.engine_routing import sample_many
from teamrl.rollout.sampler import SampleRequest
from test_lora_rows import PROMPTS, lora_team
from toy import tiny_policy


def collect():
    """A sink and the tokens it got per row, with the step count each call was."""
    rows: dict[int, list[int]] = {}
    calls = []

    def sink(step_rows: list[int], tokens: list[int]) -> None:
        calls.append(len(step_rows))
        for row, token in zip(step_rows, tokens, strict=True):
            rows.setdefault(row, []).append(token)

    return sink, rows, calls


def same(a, b) -> bool:
    return [(g.response_ids, g.logprobs, g.sampler_logprobs, g.text) for group in a for g in group] == [
        (g.response_ids, g.logprobs, g.sampler_logprobs, g.text) for group in b for g in group]


def test_the_hook_sees_each_rows_tokens_and_changes_nothing():
    policy = tiny_policy(seed=3)
    prompts = [policy.tokenizer.encode(p) for p in PROMPTS]
    params = SamplingParams(temperature=1.0, max_new_tokens=10, stop_strings=("e",))
    plain = sample(policy, prompts, 2, params, torch.Generator().manual_seed(0))
    sink, rows, calls = collect()
    hooked = sample(policy, prompts, 2, params, torch.Generator().manual_seed(0), sink)
    assert same(plain, hooked)
    for i, group in enumerate(hooked):
        for k, g in enumerate(group):
            assert rows[i * 2 + k] == g.response_ids  # a stop string's token is the last one handed out
    assert len(calls) == max(len(g.response_ids) for group in hooked for g in group)  # one call per step


def test_chunked_calls_number_rows_over_the_whole_call(monkeypatch):
    policy = tiny_policy(seed=3)
    prompts = [policy.tokenizer.encode(p) for p in PROMPTS]
    params = SamplingParams(temperature=0.0, max_new_tokens=6)
    monkeypatch.setattr(engine, "prompts_per_call", lambda *a: 1)  # one prompt per decode call
    sink, rows, _ = collect()
    groups = sample(policy, prompts, 1, params, torch.Generator(), sink)
    assert {i: rows[i] for i in range(len(prompts))} == {i: g[0].response_ids for i, g in enumerate(groups)}


def test_lora_rows_in_one_call_reach_their_own_requests_sinks():
    team = lora_team()
    prompts = [[team[0].tokenizer.encode(p) for p in PROMPTS[:2]], [team[1].tokenizer.encode(p) for p in PROMPTS[2:]]]
    params = SamplingParams(temperature=1.0, max_new_tokens=6)
    plain = sample_together(team, prompts, 1, params, torch.Generator().manual_seed(0))
    sinks = [collect(), collect()]
    requests = [SampleRequest(p, group, 1, params, sink[0]) for p, group, sink in zip(team, prompts, sinks)]
    hooked = sample_many(requests, torch.Generator().manual_seed(0))
    for (_, rows, _), before, after in zip(sinks, plain, hooked):
        assert same(before, after)
        assert rows == {i: g[0].response_ids for i, g in enumerate(after)}  # rows renumbered per request
