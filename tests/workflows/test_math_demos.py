"""Scripted math agents: well-formed transcripts that the math workflow scores as intended."""

from __future__ import annotations

import itertools
import random

import pytest

pytest.importorskip("math_verify")

from teamrl.policies.tiny_model import CHARACTERS  # noqa: E402
from teamrl.tasks.math_data import MathProblem  # noqa: E402
from teamrl.demos import driver as demo_driver  # noqa: E402
from teamrl.demos.math import (  # noqa: E402
    NO_ANSWER, MathSkill, demonstrations, drop_last_term, responder, scripted_reasoner, scripted_tool,
)
from teamrl.workflows.math_team import MathWorkflow, ProblemSplits  # noqa: E402
from teamrl.demos.plan_path import TrustedRunner  # noqa: E402
from teamrl.config.tasks import task_entry  # noqa: E402

PROBLEMS = ProblemSplits([MathProblem("a", "12-5+3", "10"), MathProblem("b", "7*8", "56")],
                         [MathProblem("c", "4*3+8", "20"), MathProblem("d", "17+5-8", "14")], "hand")
ALWAYS = MathSkill(tool_correct_sum=1.0, tool_correct_product=1.0)
NEVER = MathSkill(tool_correct_sum=0.0, tool_correct_product=0.0)


def workflow(single: bool = False) -> MathWorkflow:
    return MathWorkflow(PROBLEMS, max_turns=3, runner=TrustedRunner(), single_agent=single)


def test_drop_last_term_forgets_the_last_operand():
    assert drop_last_term("12-5+3") == "12-5"
    assert drop_last_term("7*8+3") == "7*8"
    assert drop_last_term("7*8") == "7"
    assert drop_last_term("42") == "42"


def test_the_whole_expression_scores_and_the_dropped_term_does_not():
    wf = workflow()
    rng = random.Random(0)
    right = wf.apply("tool", wf.new_state("train", 0), scripted_tool(wf.new_state("train", 0), rng, ALWAYS))
    wrong = wf.apply("tool", wf.new_state("train", 0), scripted_tool(wf.new_state("train", 0), rng, NEVER))
    assert (right.team, right.local, right.info["answer"]) == (1.0, 0.1, "10")
    assert (wrong.team, wrong.local, wrong.info["answer"]) == (0.0, 0.1, "7")


def test_the_reasoner_waits_for_the_tool_then_copies_it():
    wf, rng = workflow(), random.Random(0)
    state = wf.new_state("train", 1)
    first = scripted_reasoner(state, rng, ALWAYS)
    assert first == NO_ANSWER
    outcome = wf.apply("reasoner", state, first)
    assert (outcome.team, outcome.local, outcome.info["answer"]) == (0.0, -0.1, None)
    wf.apply("tool", state, "print(7*8)")
    copied = scripted_reasoner(state, rng, ALWAYS)
    assert copied == "answer: 56"
    assert wf.apply("reasoner", state, copied).team == 1.0


def test_scripted_team_success_follows_the_tool():
    respond_always, respond_never = responder(ALWAYS), responder(NEVER)
    assert demo_driver.scripted_success_rate(workflow(), respond_always, 2) == 1.0
    assert demo_driver.scripted_success_rate(workflow(), respond_never, 2) == 0.0
    # Alone, the reasoner never answers: the single-agent baseline cannot solve anything.
    assert demo_driver.scripted_success_rate(workflow(single=True), respond_always, 2) == 0.0


def test_demonstrations_are_compact_and_in_the_tiny_vocabulary():
    wf = workflow()
    triples = list(itertools.islice(demonstrations(wf, 0, MathSkill()), 60))
    known = set(CHARACTERS)
    assert {agent for agent, _, _ in triples} == {"reasoner", "tool"}
    for agent, prompt, response in triples:
        assert prompt.startswith(agent + "\nq:") and prompt.endswith("\n>")
        assert set(prompt + response) <= known
        assert response == NO_ANSWER or response.startswith(("answer: ", "print("))
    # Systematic imperfection: both tool variants occur, the whole expression and the dropped term.
    tools = [(p.split("\n")[1][2:], r) for a, p, r in triples if a == "tool"]
    assert any(r == f"print({q})" for q, r in tools) and any(r != f"print({q})" for q, r in tools)


def test_registry_warms_the_math_task_up_on_these_demos():
    entry = task_entry("math")
    assert "teamrl.demos.math" in entry.sources
    agent, prompt, response = next(entry.demos(workflow(), 0))
    assert agent == "reasoner" and prompt.startswith("reasoner\n")


def test_bad_skill_and_chat_prompts_are_rejected():
    with pytest.raises(ValueError, match="tool_correct_sum"):
        MathSkill(tool_correct_sum=1.5)
    chat = MathWorkflow(PROBLEMS, runner=TrustedRunner(), prompt_style="chat")
    with pytest.raises(ValueError, match="compact"):
        demonstrations(chat, 0, MathSkill())
