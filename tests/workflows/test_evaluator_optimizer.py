"""Evaluator-optimizer: generate, judge, refine until accepted or capped; verdict rewards."""

from __future__ import annotations

import pytest

pytest.importorskip("math_verify")

from study_helpers import B, GARBAGE, math_domain, speak  # noqa: E402
from teamrl.workflows.evaluator_optimizer import EvaluatorOptimizerWorkflow  # noqa: E402


@pytest.fixture
def wf():
    return EvaluatorOptimizerWorkflow(math_domain(), max_turns=3, format_bonus=B)


def test_accepting_a_right_answer_ends_the_episode(wf):
    state = wf.new_state("train", 0)
    gen = speak(wf, "generator", state, "18-6=12;12+8=20")
    assert (gen.team, gen.local, gen.terms["correct"]) == (1.0, B, 1.0)
    assert not wf.is_done(state)
    ev = speak(wf, "evaluator", state, "ok")
    assert (ev.team, ev.local) == (1.0, B) and ev.terms == {"format_ok": 1.0, "format": B, "verdict_correct": 1.0}
    assert wf.is_done(state) and wf.success(state) and state.turn == 1


def test_rejection_sends_the_generator_back_with_the_feedback(wf):
    state = wf.new_state("train", 0)
    speak(wf, "generator", state, "6+8=14;18-14=4")
    ev = speak(wf, "evaluator", state, "no order is left to right")
    assert ev.team == 1.0 and ev.info["verdict"] is False  # rejecting a wrong answer is right
    assert not wf.is_done(state)
    assert wf.render("generator", state) == "g\nq:18-6+8\nwas:4 no order is left to right\n>"
    assert wf.render("evaluator", state) == "ev\nq:18-6+8\na:6+8=14;18-14=4\n>"
    speak(wf, "generator", state, "18-6=12;12+8=20")
    assert wf.render("evaluator", state).endswith("a:18-6=12;12+8=20\n>")


def test_wrong_verdicts_and_missing_verdicts(wf):
    state = wf.new_state("train", 0)
    speak(wf, "generator", state, "4")
    accepted_wrong = speak(wf, "evaluator", state, "\\boxed{Correct} looks fine")
    assert (accepted_wrong.team, accepted_wrong.terms["verdict_correct"]) == (0.0, 0.0)
    assert wf.is_done(state) and not wf.success(state)  # accepted: the episode ends on a wrong answer
    state = wf.new_state("train", 0)
    speak(wf, "generator", state, "20")
    rejected_right = speak(wf, "evaluator", state, "\\boxed{Incorrect}")
    assert rejected_right.team == 0.0 and not wf.is_done(state)
    silent = speak(wf, "evaluator", state, "hmm, let me think")
    assert (silent.team, silent.local, silent.terms["format_ok"]) == (0.0, -B, 0.0)


def test_the_cap_ends_the_episode_and_success_is_the_last_answer(wf):
    state = wf.new_state("train", 0)
    for answer in ["4", "21", "20"]:
        speak(wf, "generator", state, answer)
        assert not wf.is_done(state)
        speak(wf, "evaluator", state, "no")
    assert wf.is_done(state) and state.turn == 3 and wf.success(state)


def test_default_cap_comes_from_the_domain():
    assert EvaluatorOptimizerWorkflow(math_domain()).max_turns == 3
    chat = EvaluatorOptimizerWorkflow(math_domain(), prompt_style="chat")
    state = chat.new_state("train", 0)
    speak(chat, "generator", state, "I get 4.")
    assert "\\boxed{Correct}" in chat.render("evaluator", state)
    speak(chat, "evaluator", state, "\\boxed{Incorrect} Evaluate left to right.")
    prompt = chat.render("generator", state)
    assert "Incorrect" in prompt and "Evaluate left to right." in prompt and "I get 4." in prompt


@pytest.mark.parametrize("text", GARBAGE)
def test_garbage_never_raises(wf, text):
    state = wf.new_state("train", 1)
    while not wf.is_done(state):
        assert speak(wf, "generator", state, text).local == -B or text in ("-1", "99999999999999999999999999999999999")
        speak(wf, "evaluator", state, text)
    assert state.turn <= 3
