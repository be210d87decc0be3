"""The flow workflows on the code task: programs graded by their ground-truth tests in the sandbox."""

from __future__ import annotations

import pytest

from study_helpers import B, speak
from teamrl.workflows.code_runner import CodeRunner
from teamrl.workflows.code_team import CodeTaskConfig
from teamrl.config.tasks import task_entry
from teamrl.workflows.flow_domains import Answer, CodeDomain

SETTINGS = CodeTaskConfig(source="procedural:mul")


@pytest.fixture(scope="module")
def runner():
    runner = CodeRunner(wall_time_s=1.0)
    yield runner
    runner.close()


def build(kind, runner, **kwargs):
    return task_entry("code").build(kind, SETTINGS, runner=runner, format_bonus=B, **kwargs)


def first_problem(wf):
    """(state, a right response, a wrong one) on the first training problem (`return x*N`)."""
    state = wf.new_state("train", 0)
    reference = state.problem.reference_solution
    assert "x*" in reference
    return state, f"```python\n{reference}\n```", f"```python\n{reference.replace('x*', 'x+')}\n```"


def test_voting_on_code(runner):
    wf = build("voting", runner)
    state, RIGHT, WRONG = first_problem(wf)
    outs = [speak(wf, g, state, text) for g, text in zip(wf.generators, [WRONG, RIGHT, "no code"])]
    assert [o.team for o in outs] == [0.0, 1.0, 0.0] and [o.local for o in outs] == [B, B, -B]
    agg = speak(wf, "aggregator", state, "1")
    assert agg.terms["correct"] == 1.0 and wf.success(state)


def test_evaluator_optimizer_on_code_caps_at_two_by_default(runner):
    wf = build("evaluator_optimizer", runner)
    assert wf.max_turns == 2
    state, RIGHT, WRONG = first_problem(wf)
    assert speak(wf, "generator", state, WRONG).terms["score"] < 1.0
    assert speak(wf, "evaluator", state, "\\boxed{Incorrect} times means *").terms["verdict_correct"] == 1.0
    speak(wf, "generator", state, RIGHT)
    speak(wf, "evaluator", state, "\\boxed{Incorrect}")
    assert wf.is_done(state) and wf.success(state)


def test_debate_majority_compares_programs_by_syntax(runner):
    domain = CodeDomain(SETTINGS, runner)
    same = [Answer("def f(x):\n    return x*5\n", True, ""), Answer("def f(x): return x * 5  # times", True, "")]
    assert domain.same(*same) and not domain.same(same[0], Answer("def f(x): return x+5", True, ""))
    assert not domain.same(same[0], Answer(None, False, ""))
    wf = build("debate", runner, max_turns=2)
    state, RIGHT, WRONG = first_problem(wf)
    for d, text in zip(wf.debaters, [RIGHT, WRONG, RIGHT.replace("x*", "1*x*")]):
        speak(wf, d, state, text)
    assert state.round == 1 and not state.unanimous
    assert wf.success(state)  # programs differ in text; the first right one wins the tie of singletons


def test_other_settings_are_refused():
    with pytest.raises(ValueError, match="math and code"):
        from teamrl.workflows.flow_domains import flow_domain
        flow_domain(object())
