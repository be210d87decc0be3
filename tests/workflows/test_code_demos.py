"""Scripted code agents: well-formed transcripts that the code workflow scores as intended."""

from __future__ import annotations

import itertools
import random

import pytest

from teamrl.policies.tiny_model import CHARACTERS
from teamrl.demos import driver as demo_driver
from teamrl.demos.code import (
    SMOKE_TEST, CodeSkill, TrustedCodeRunner, checking_test, code_workflow, coder_program, demonstrations,
    phrase_terms, responder,
)
from teamrl.workflows.code_parsing import parse_tests
from teamrl.workflows.code_team import CodeState, CodeTaskConfig, CodeWorkflow
from teamrl.demos.plan_path import TrustedRunner
from teamrl.config.tasks import task_entry

SOURCE = "procedural:add,sub,mul,affine"
PERFECT = CodeSkill(coder_times=1.0, coder_fix=1.0, tester_checks=1.0)


@pytest.fixture
def wf() -> CodeWorkflow:
    return code_workflow(CodeTaskConfig(source=SOURCE, n_mutants=3), runner=TrustedRunner(), max_turns=3)


def state_for(wf: CodeWorkflow, family: str) -> CodeState:
    """The first training instance of `family`."""
    for index in itertools.count():
        state = wf.new_state("train", index)
        if state.problem.metadata["family"] == family:
            return state
    raise AssertionError("unreachable")


def test_phrases_become_programs_and_arithmetic_free_tests():
    cases = {"x plus 3": ([("+", 3)], "return x+3", "assert f(0)==3"),
             "x minus 2": ([("-", 2)], "return x-2", "assert f(0)==-2"),
             "x times 4": ([("*", 4)], "return x*4", "assert f(1)==4"),
             "x times 4 plus 5": ([("*", 4), ("+", 5)], "return x*4+5", "assert f(0)==5")}
    for phrase, (terms, program, test) in cases.items():
        state = CodeState(problem=type("P", (), {"metadata": {"short": f"f(x): {phrase}"}, "id": "hand"})())
        assert phrase_terms(state) == terms
        assert coder_program(terms) == program and checking_test(terms) == test
    assert coder_program([("*", 4), ("+", 5)], "+") == "return x+4+5"


def test_other_families_are_refused_with_the_source_to_use():
    wf = CodeWorkflow("procedural:mod", runner=TrustedCodeRunner())
    with pytest.raises(ValueError, match="procedural:add,sub,mul,affine"):
        phrase_terms(wf.new_state("train", 0))


def test_right_program_scores_and_times_as_plus_does_not(wf):
    state = state_for(wf, "affine")
    terms = phrase_terms(state)
    right = wf.apply("coder", CodeState(state.problem), coder_program(terms))
    wrong = wf.apply("coder", CodeState(state.problem), coder_program(terms, "+"))
    assert (right.team, right.local) == (1.0, 0.1)
    assert wrong.team < 1.0 and wrong.local == 0.1


def test_checking_test_separates_better_than_the_smoke_test(wf):
    state = state_for(wf, "mul")
    check = wf.apply("tester", CodeState(state.problem), checking_test(phrase_terms(state)))
    smoke = wf.apply("tester", CodeState(state.problem), SMOKE_TEST)
    assert check.terms["separation"] == 1.0  # every known-wrong mutant fails it
    assert 0.0 <= smoke.terms["separation"] < check.terms["separation"]
    # The bonus pays in proportion to what the tests catch.
    assert check.terms["format"] == 0.1 and smoke.terms["format"] == pytest.approx(0.1 * smoke.terms["separation"])


def test_a_failed_checking_test_makes_the_coder_fix_its_program(wf):
    state = state_for(wf, "mul")
    terms, rng = phrase_terms(state), random.Random(0)
    wf.apply("coder", state, coder_program(terms, "+"))
    wf.apply("tester", state, checking_test(terms))
    assert state.turn == 1 and not state.passed and "0/1 passed" in wf.render("coder", state)
    fixed = responder(CodeSkill(coder_times=0.0, coder_fix=1.0))("coder", state, rng)
    assert fixed == coder_program(terms)
    assert wf.apply("coder", state, fixed).team == 1.0


def test_scripted_success_depends_on_the_systematic_flaws(wf):
    assert demo_driver.scripted_success_rate(wf, responder(PERFECT), 20) == 1.0
    # A coder that reads "times" as plus, caught by a checking tester, still ends right.
    assert demo_driver.scripted_success_rate(wf, responder(CodeSkill(0.0, 1.0, 1.0)), 20) == 1.0
    # With only smoke tests nobody catches it: only the plus / minus tasks are solved.
    smoke_only = demo_driver.scripted_success_rate(wf, responder(CodeSkill(0.0, 1.0, 0.0)), 20)
    plus_minus = sum(wf.new_state("heldout", i).problem.metadata["family"] in ("add", "sub") for i in range(20))
    assert smoke_only == plus_minus / 20 < 1.0


def test_trusted_runner_gives_the_sandbox_verdicts():
    jobs = [("def f(x):\n    return x*4+5\n", parse_tests("assert f(0)==5\nassert f(1)==9", "f")[0]),
            ("def f(x):\n    return x+4+5\n", parse_tests("assert f(0)==5\nassert f(1)==9", "f")[0]),
            ("def f(x):\n    return x+\n", parse_tests("assert f(0)==5", "f")[0])]
    trusted = TrustedCodeRunner().run_units(jobs)
    assert [r.passed for r in trusted] == [[True, True], [False, False], [False]]
    assert [r.loaded for r in trusted] == [True, True, False]
    assert trusted[1].errors == ["AssertionError", "AssertionError"]


def test_demonstrations_are_compact_and_in_the_tiny_vocabulary(wf):
    triples = list(itertools.islice(demonstrations(wf, 0, CodeSkill()), 60))
    known = set(CHARACTERS)
    assert {agent for agent, _, _ in triples} == {"coder", "tester"}
    for agent, prompt, response in triples:
        assert prompt.startswith(agent + "\nf(x): ") and prompt.endswith("\n>")
        assert set(prompt + response) <= known
        assert response.startswith("return x" if agent == "coder" else "assert ")
    assert any("result:" in prompt for _, prompt, _ in triples)  # second turns are demonstrated too


def test_registry_builds_the_code_task_for_the_warm_up():
    entry = task_entry("code")
    built = entry.build("team", CodeTaskConfig(source=SOURCE), runner=TrustedRunner())
    assert isinstance(built.runner, TrustedCodeRunner)
    assert entry.build("single", CodeTaskConfig(source=SOURCE)).runner.__class__.__name__ == "CodeRunner"
    assert next(entry.demos(built, 0))[0] == "coder"
    with pytest.raises(TypeError, match="CodeRunner"):
        code_workflow(CodeTaskConfig(source=SOURCE), runner=object())
    with pytest.raises(ValueError, match="coder_fix"):
        CodeSkill(coder_fix=-0.1)
