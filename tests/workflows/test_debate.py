"""Debate: parallel rounds, each sees the previous round; majority final answer; early stop."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("math_verify")

from study_helpers import B, GARBAGE, math_domain  # noqa: E402
from teamrl.workflows.debate import DebateWorkflow  # noqa: E402


def round_of(wf, state, answers):
    """The parallel driver: every debater scored on a copy of the pre-round state, then all committed."""
    pre = copy.deepcopy(state)
    outcomes = [wf.apply(d, copy.deepcopy(pre), a) for d, a in zip(wf.debaters, answers)]
    assert [wf.render(d, state) for d in wf.debaters] == [wf.render(d, pre) for d in wf.debaters]
    for d, a in zip(wf.debaters, answers):
        wf.apply(d, state, a)
    return outcomes


@pytest.fixture
def wf():
    return DebateWorkflow(math_domain(), max_turns=3, format_bonus=B)


def test_rounds_show_the_previous_answers_and_majority_wins(wf):
    assert wf.parallel and {a.role for a in wf.agents} == {"debater"}
    state = wf.new_state("train", 0)
    assert wf.render("debater_1", state) == "d1\nq:18-6+8\n>"
    out = round_of(wf, state, ["20", "6+8=14;18-14=4", "4"])
    assert [o.team for o in out] == [1.0, 0.0, 0.0] and all(o.local == B for o in out)
    assert state.round == 1 and not wf.is_done(state)
    assert wf.render("debater_0", state) == "d0\nq:18-6+8\n0:20 1:4 2:4\n>"
    assert wf.final(state) == ("4", 0.0) and not wf.success(state)
    round_of(wf, state, ["20", "20", "4"])
    assert wf.final(state) == ("20", 1.0) and wf.success(state)
    assert not wf.is_done(state)
    round_of(wf, state, ["20", "20", "4"])
    assert wf.is_done(state) and state.round == 3


def test_unanimity_ends_early_and_first_rule(wf):
    state = wf.new_state("train", 0)
    round_of(wf, state, ["20", "answer: 20", "18-6=12;12+8=20"])
    assert state.unanimous and wf.is_done(state) and wf.success(state)
    first = DebateWorkflow(math_domain(), max_turns=2, final_rule="first", stop_when_unanimous=False)
    state = first.new_state("train", 0)
    round_of(first, state, ["4", "20", "20"])
    assert not first.is_done(state) and first.final(state) == ("4", 0.0)


def test_ties_go_to_the_lowest_debater_and_missing_answers_never_win():
    wf = DebateWorkflow(math_domain(), n_debaters=4)
    state = wf.new_state("train", 0)
    round_of(wf, state, ["nothing", "21", "20", "20"])
    assert wf.final(state) == ("20", 1.0)
    state = wf.new_state("train", 0)
    round_of(wf, state, ["21", "20", "21", "20"])
    assert wf.final(state) == ("21", 0.0)


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="final_rule"):
        DebateWorkflow(math_domain(), final_rule="vote")
    with pytest.raises(ValueError, match="at least 2"):
        DebateWorkflow(math_domain(), n_debaters=1)


@pytest.mark.parametrize("text", GARBAGE)
def test_garbage_never_raises(wf, text):
    state = wf.new_state("train", 1)
    while not wf.is_done(state):
        round_of(wf, state, [text] * 3)
    assert state.round <= 3 and wf.final(state)[1] in (0.0, 1.0)
