"""The flow workflows' verifier contract (docs/verifiers/plans.md): one vote, one verdict, n strategies,
one answer value; parametrized accepted and refused styles, properties, and bounded time."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from study_helpers import B, math_domain

from teamrl.tasks.math_data import MathProblem
from teamrl.workflows.evaluator_optimizer import EvaluatorOptimizerWorkflow
from teamrl.workflows.flow_common import parse_choice, parse_strategies, parse_verdict
from teamrl.workflows.voting import VotingWorkflow

FEW = settings(max_examples=30, deadline=None)


@pytest.mark.parametrize("text", [
    "1", " 1 \n", "#1", "\\#1", "Answer: 1", "answer 1", "Choice 1.", "\\boxed{1}", "\\boxed{\\text{1}}",
    "\\boxed{#1}", "Answer 0 and answer 2 disagree; answer 1 checks out.\n\\boxed{1}", "\\boxed{1} and again \\boxed{1}",
    "I choose answer 1 because it checks out.", "My choice is 1.", "I pick candidate 1.", "Select #1",
    "Answer 0 gives 21 but I choose answer 1.", "1\n1", "I choose answer 1, and answer 0 is wrong.",
    "I choose answer 1 because answer 0 is incorrect. Answer 2 is wrong too.", "My choice is 1 (answer 1 checks out).",
])
def test_parse_choice_accepts(text: str) -> None:
    assert parse_choice(text, 3) == 1


@pytest.mark.parametrize("text", [
    "", "0 or 1", "0 1 2", "\\boxed{0} \\boxed{1}", "\\boxed{0, 1}", "\\boxed{0,1,2}", "\\boxed{1 or 2}",
    "I choose answer 0. On reflection I choose answer 1.", "I choose 2.\n\\boxed{1}\n\\boxed{2}",
    "I choose 0 or 1", "I pick answer 0 or answer 1.", "I choose 1/2", "Select #0, #1", "0\n1", "Answer: 0\n1",
    "The answer is 1", "\\boxed{3}", "\\boxed{20}", "-1", "one", "answer" + "9" * 5000, "\\boxed{" + "1" * 5000 + "}",
    # a decision followed by another candidate offered as acceptable: a hedged vote
    "I pick 0, but answer 2 is also fine", "my choice is 2 (or 0)", "I choose answer 1; answer 2 would work too.",
    "I pick 1 (2 is also fine).", "My choice is 2, or maybe 0.", "I choose answer 0, though candidate 1 is equally good.",
    "I choose answer 1. Answer 0 is not wrong either.", "I select #2. Then again #0.",
])
def test_parse_choice_refuses(text: str) -> None:
    assert parse_choice(text, 3) is None


@pytest.mark.parametrize("text, verdict", [
    ("ok", True), ("no", False), ("Correct", True), ("Incorrect.", False), ("**Correct**", True), ("C", True),
    ("I", False), ("yes, 18-6=12 holds", True), ("wrong: 18-6 is 12", False), ("Verdict: Correct", True),
    ("\\boxed{Correct}", True), ("\\boxed{Incorrect} The sign is wrong.", False), ("\\boxed{\\text{Correct}}", True),
    ("No errors found. \\boxed{Correct}", True), ("Right, let me check. \\boxed{Incorrect}", False),
    ("\\boxed{Correct} Nothing is wrong, the answer is correct. \\boxed{Correct}", True),
    ("Correct, no issues.", True),
])
def test_parse_verdict_accepts(text: str, verdict: bool) -> None:
    assert parse_verdict(text)[0] is verdict


@pytest.mark.parametrize("text", [
    "", "maybe", "\\boxed{Correct} \\boxed{Incorrect}", "Correct. \\boxed{Incorrect}", "Incorrect \\boxed{Correct}",
    "Correct or Incorrect", "Incorrect or correct", "ok/no", "no/ok", "yes | no", "I think it is right.",
    "I have not checked this.", "C is the letter", "\\boxed{20}", "The evaluator says ok",
])
def test_parse_verdict_refuses(text: str) -> None:
    assert parse_verdict(text)[0] is None


@pytest.mark.parametrize("text, items", [
    ("l r l", ["l", "r", "l"]), ("1. add\n2. subtract\n3. check", ["add", "subtract", "check"]),
    ("Strategy 1: a b\nStrategy 2: c\nStrategy 3: d e", ["a b", "c", "d e"]),
    ("1) add\n\n2) subtract\n\n3) check", ["add", "subtract", "check"]),
    ("add first\nsubtract first\nestimate", ["add first", "subtract first", "estimate"]),
    ("l, r, l", ["l", "r", "l"]),
])
def test_parse_strategies_accepts(text: str, items: list[str]) -> None:
    assert parse_strategies(text, 3) == (items, True)


@pytest.mark.parametrize("text", [
    "", "l r", "l r l r", "just do the sum carefully and check it twice", "add first\nthen subtract\ncheck\nrecheck",
    "- - -", "Here are the plans:\n1. add\n2. subtract", "1. a\n2. b\n3. c\n4. d", "\n" * 5000,
])
def test_parse_strategies_refuses(text: str) -> None:
    found, ok = parse_strategies(text, 3)
    assert not ok and len(found) == 3


# --------------------------------------------------------------------------- answers and rewards

@pytest.mark.parametrize("answer, correct", [
    ("20", True), ("Answer: 20", True), ("\\boxed{20}", True), ("18-6=12;12+8=20", True), ("\\boxed{20.0}", True),
    ("Answer: 19 or 20", False), ("\\boxed{19, 20, 21}", False), ("\\boxed{\\{19, 20\\}}", False),
    ("The answer is 21; 20", False), ("\\boxed{20 \\pm 1}", False),
])
def test_a_hedged_answer_never_equals_a_one_value_reference(answer: str, correct: bool) -> None:
    domain = math_domain()
    problem = MathProblem("t", "18-6+8", "20")
    parsed = domain.parse(answer, problem)
    assert domain.grade([problem], [parsed]) == [float(correct)]
    assert parsed.well_formed is correct  # a hedge or a non-number earns no format bonus either


def test_a_non_number_answer_to_a_numeric_question_is_not_well_formed() -> None:
    domain = math_domain()
    assert not domain.parse("Answer: banana", MathProblem("t", "2+2", "4")).well_formed
    assert domain.parse("Answer: yes", MathProblem("t", "Is 4 even?", "yes")).well_formed


def test_a_vote_naming_two_candidates_scores_nothing() -> None:
    workflow = VotingWorkflow(math_domain())
    state = workflow.new_state("train", 0)
    for i, generator in enumerate(workflow.generators):
        workflow.apply(generator, state, f"Answer: {20 if i == 1 else 30 + i}")
    outcome = workflow.apply("aggregator", state, "\\boxed{0} \\boxed{1}")
    assert (outcome.team, outcome.local) == (0.0, -B) and not workflow.success(state)


@pytest.mark.parametrize("right", [True, False])
def test_a_verdict_saying_both_scores_nothing(right: bool) -> None:
    workflow = EvaluatorOptimizerWorkflow(math_domain())
    state = workflow.new_state("train", 0)
    workflow.apply("generator", state, f"Answer: {20 if right else 21}")
    outcome = workflow.apply("evaluator", state, "\\boxed{Correct} \\boxed{Incorrect}")
    assert (outcome.team, outcome.local) == (0.0, -B) and state.verdict is None


# --------------------------------------------------------------------------- properties and time

@FEW
@given(st.integers(0, 2), st.sampled_from(["{}", "\\boxed{{{}}}", "Answer: {}", "I choose answer {}.", "#{}"]),
       st.sampled_from(["", "Let me compare them.\n", "Answer 0 and answer 2 differ.\n"]))
def test_parse_choice_round_trip(index: int, form: str, preamble: str) -> None:
    assert parse_choice(preamble + form.format(index), 3) == index


@FEW
@given(st.text(max_size=300))
def test_study_parsers_never_raise(text: str) -> None:
    assert parse_choice(text, 3) in (None, 0, 1, 2)
    verdict, feedback = parse_verdict(text)
    assert verdict in (None, True, False) and isinstance(feedback, str)
    found, ok = parse_strategies(text, 3)
    assert len(found) == 3 and isinstance(ok, bool)


ADVERSARIAL = ["answer" + " " * 200_000 + "x", "answer" * 33_000, "\n" * 200_000, "\\boxed{" * 28_000,
               "\\boxed{0}" * 22_000, "choose " * 28_000, "Correct or " * 18_000, "1. " * 66_000,
               "ok/" * 66_000, "9" * 200_000, "\\boxed" + " " * 200_000, "Strategy" + " \t" * 100_000]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: f"{t[:8]!r}x{len(t)}")
def test_study_parsers_finish_fast_on_200k_adversarial_text(text: str) -> None:
    # The old choice and strategy regexes took ~5-7 s on 8k spaces or newlines, 4x per doubling:
    # hours at 200k. The bound is loose for a loaded machine and still far below that.
    start = time.perf_counter()
    parse_choice(text, 3)
    parse_verdict(text)
    parse_strategies(text, 3)
    math_domain().parse(text, MathProblem("t", "2+2", "4"))
    assert time.perf_counter() - start < 20.0
