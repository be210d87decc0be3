"""Voting: generators answer blind to each other, the aggregator picks one; rewards and terms."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
import torch

pytest.importorskip("math_verify")

from study_helpers import B, GARBAGE, math_domain, speak  # noqa: E402
from teamrl.rollout.builtin_engine import SamplingParams  # noqa: E402
from teamrl.rollout.tree import RewardWeights, run_episodes  # noqa: E402
from teamrl.workflows.base import Workflow  # noqa: E402
from teamrl.workflows.voting import VotingWorkflow  # noqa: E402
from toy import tiny_policy  # noqa: E402


@pytest.fixture
def wf():
    return VotingWorkflow(math_domain(), format_bonus=B)


def vote(wf, answers, choice):
    state = wf.new_state("train", 0)  # 18-6+8 = 20
    outcomes = {g: speak(wf, g, state, a) for g, a in zip(wf.generators, answers)}
    outcomes["aggregator"] = speak(wf, "aggregator", state, choice)
    return state, outcomes


def test_agents_roles_and_one_turn(wf):
    assert isinstance(wf, Workflow)
    assert [a.name for a in wf.agents] == ["generator_0", "generator_1", "generator_2", "aggregator"]
    assert {a.role for a in wf.agents} == {"generator", "aggregator"}
    assert wf.max_turns == 1 and not wf.parallel
    assert VotingWorkflow(math_domain(), max_turns=5).max_turns == 1


def test_generators_never_see_each_other_and_the_aggregator_sees_all(wf):
    state = wf.new_state("train", 0)
    first = wf.render("generator_0", state)
    speak(wf, "generator_0", state, "18-6=12;12+8=20")
    assert wf.render("generator_1", state) == first.replace("g0", "g1")
    speak(wf, "generator_1", state, "6+8=14;18-14=4")
    speak(wf, "generator_2", state, "nonsense")
    assert wf.render("aggregator", state) == "agg\nq:18-6+8\n0:20 1:4 2:?\n>"
    chat = VotingWorkflow(math_domain(), prompt_style="chat")
    s = chat.new_state("train", 0)
    speak(chat, "generator_0", s, "so \\boxed{20}")
    prompt = chat.render("aggregator", s)
    assert "\\boxed{N}" in prompt and "so \\boxed{20}" in prompt and "its final answer: 20" in prompt


def test_rewards_of_a_right_pick(wf):
    state, out = vote(wf, ["18-6=12;12+8=20", "6+8=14;18-14=4", "answer: 20"], "2")
    assert (out["generator_0"].team, out["generator_0"].local) == (1.0, B)
    assert out["generator_1"].team == 0.0 and out["generator_1"].terms["correct"] == 0.0
    agg = out["aggregator"]
    assert (agg.team, agg.local) == (1.0, B)
    assert agg.terms == {"format_ok": 1.0, "format": B, "score": 1.0, "correct": 1.0, "any_correct": 1.0}
    assert wf.is_done(state) and wf.success(state) and state.choice == 2


def test_a_wrong_pick_and_an_invalid_pick(wf):
    state, out = vote(wf, ["20", "4", "21"], "\\boxed{1}")
    assert out["aggregator"].team == 0.0 and out["aggregator"].terms["any_correct"] == 1.0
    assert wf.is_done(state) and not wf.success(state)
    for bad in ["3", "the first one", "", "-1", "\\boxed{7}"]:
        state, out = vote(wf, ["20", "4", "21"], bad)
        agg = out["aggregator"]
        assert (agg.team, agg.local, agg.terms["format_ok"]) == (0.0, -B, 0.0), bad
        assert wf.is_done(state) and not wf.success(state) and state.choice is None


def test_no_correct_answer_means_no_oracle(wf):
    _, out = vote(wf, ["4", "21", "?"], "0")
    assert out["aggregator"].terms["any_correct"] == 0.0
    assert out["generator_2"].terms["format_ok"] == 0.0 and out["generator_2"].local == -B


@pytest.mark.parametrize("text", GARBAGE)
def test_garbage_never_raises(wf, text):
    state = wf.new_state("train", 1)
    for agent in [a.name for a in wf.agents]:
        out = speak(wf, agent, state, text)
        assert out.local == -B or out.terms["format_ok"] == 1.0
    assert wf.is_done(state)


def test_unknown_agent_is_named(wf):
    with pytest.raises(ValueError, match="generator_0"):
        wf.render("voter", wf.new_state("train", 0))


def test_through_the_rollout_driver_groups_stay_instance_turn_agent():
    wf = VotingWorkflow(math_domain(), format_bonus=B)
    policy = tiny_policy("llama", seed=0)
    samples, episodes = run_episodes(wf, [0, 1], "train", {"p": policy}, {a.name: "p" for a in wf.agents},
                                     SamplingParams(temperature=1.5, max_new_tokens=4), 3, RewardWeights(),
                                     torch.Generator().manual_seed(0), random.Random(0))
    groups = defaultdict(list)
    for s in samples:
        groups[s.tree_key].append(s)
    assert set(groups) == {(i, 0, a.name) for i in (0, 1) for a in wf.agents}
    assert all(len(g) == 3 and sum(s.committed for s in g) == 1 for g in groups.values())
    for e in episodes:
        assert e.turns == 1 and wf.is_done(e.state)
        committed = {s.agent: s.generation.text for s in samples if s.instance == e.instance and s.committed}
        # the aggregator read the committed generators' answers
        shown = wf.domain.parse(committed["generator_1"], e.state.problem).shown
        agg_prompt = next(s for s in samples if s.instance == e.instance and s.agent == "aggregator")
        assert f"1:{shown}" in policy.tokenizer.decode(agg_prompt.generation.prompt_ids)
