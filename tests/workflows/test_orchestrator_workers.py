"""Orchestrator-workers: strategies reach their workers, the synthesizer answers; rewards and terms."""

from __future__ import annotations

import pytest

pytest.importorskip("math_verify")

from study_helpers import B, GARBAGE, math_domain, speak  # noqa: E402
from teamrl.workflows.orchestrator_workers import OrchestratorWorkersWorkflow  # noqa: E402


@pytest.fixture
def wf():
    return OrchestratorWorkersWorkflow(math_domain(), format_bonus=B)


def test_turn_order_and_roles(wf):
    assert [a.name for a in wf.agents] == ["orchestrator", "worker_0", "worker_1", "worker_2", "synthesizer"]
    assert [a.role for a in wf.agents] == ["orchestrator", "worker", "worker", "worker", "synthesizer"]
    assert wf.max_turns == 1 and not wf.parallel


def test_each_worker_gets_its_strategy_and_the_synthesizer_all_answers(wf):
    state = wf.new_state("train", 0)
    orc = speak(wf, "orchestrator", state, "l r l")
    assert (orc.team, orc.local) == (0.0, B) and orc.terms == {"format_ok": 1.0, "format": B}
    assert wf.render("worker_1", state) == "w1\nq:18-6+8\ns:r\n>"
    workers = [speak(wf, w, state, a) for w, a in zip(wf.workers, ["20", "6+8=14;18-14=4", "no idea"])]
    assert [o.team for o in workers] == [1.0, 0.0, 0.0]
    assert [o.local for o in workers] == [B, B, -B]
    assert wf.render("synthesizer", state) == "syn\nq:18-6+8\n0:20 1:4 2:?\n>"
    syn = speak(wf, "synthesizer", state, "20")
    assert syn.terms == {"format_ok": 1.0, "format": B, "score": 1.0, "correct": 1.0, "any_correct": 1.0}
    assert wf.is_done(state) and wf.success(state)


def test_too_few_strategies_and_a_wrong_synthesis(wf):
    state = wf.new_state("train", 0)
    orc = speak(wf, "orchestrator", state, "only one")
    assert orc.local == -B and state.strategies == ["only", "one", ""]
    assert wf.render("worker_2", state).endswith("s:\n>")
    for w in wf.workers:
        speak(wf, w, state, "4")
    syn = speak(wf, "synthesizer", state, "the answer is 21")
    assert (syn.team, syn.terms["any_correct"]) == (0.0, 0.0)
    assert wf.is_done(state) and not wf.success(state)


def test_chat_prompts_carry_numbered_strategies():
    wf = OrchestratorWorkersWorkflow(math_domain(), prompt_style="chat")
    state = wf.new_state("train", 0)
    speak(wf, "orchestrator", state, "Plan:\n1. Left to right.\n2. Group the additions.\n3) Estimate, then check.")
    assert state.strategies == ["Left to right.", "Group the additions.", "Estimate, then check."]
    assert "Your strategy: Group the additions." in wf.render("worker_1", state)


@pytest.mark.parametrize("text", GARBAGE)
def test_garbage_never_raises(wf, text):
    state = wf.new_state("train", 1)
    for agent in [a.name for a in wf.agents]:
        speak(wf, agent, state, text)
    assert wf.is_done(state)
