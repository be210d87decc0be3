"""Right answers in the styles real instruct models write are paid, and the hacks those leniencies could
let in are not. Every case runs on both reward paths: `answers_match` and the math
team's own `apply`. Needs math-verify; skipped with a reason without it."""

from __future__ import annotations

import pytest

pytest.importorskip("math_verify", reason="math-verify not installed: pip install math-verify")

from teamrl.probes.math_fidelity import load_correct_responses, measure  # noqa: E402
from teamrl.tasks.math_answers import answers_match  # noqa: E402
from teamrl.tasks.math_data import MathProblem  # noqa: E402
from teamrl.tasks.math_words import number_in_words, spelled_value  # noqa: E402
from teamrl.workflows.math_team import MathWorkflow, ProblemSplits  # noqa: E402

QUESTION = "Tom has 17 marbles and buys 25 more. How many marbles does Tom have now?"


def _paid(response: str, gold: str = "42", question: str = QUESTION, source: str = "gsm8k-style") -> tuple[bool, bool]:
    """(the workflow's team term is 1, answers_match holds)."""
    problem = MathProblem("t", question, gold, source=source)
    workflow = MathWorkflow(ProblemSplits([problem], [problem]), single_agent=True)
    team = workflow.apply("reasoner", workflow.new_state("train", 0), response).team
    return team == 1.0, answers_match(response, gold)


@pytest.mark.parametrize("response", [
    # a number with a unit or unit word
    "6 x 7 = 42.\nThe answer is 42 cm^2.", "The answer is $42$ dollars.", "\\boxed{42\\,\\text{cm}}",
    "\\boxed{42 \\text{ cm}^2}", "Answer: $ 42\\ \\mathrm{cm^2} $", "The answer is 42 cm².",
    # an answer line followed by a check that repeats the same number
    "The answer is 42. So, Tom has 42 marbles.", "\\boxed{42}. Check: 17 + 25 = 42.",
    # the number with its spelled-out form
    "The answer is 42 (forty-two).", "Answer: 42 (forty two)",
    # a final prose sentence without an answer marker
    "17 + 25 = 42.\nSo, Tom has 42 marbles.", "**So, Tom has 42 marbles.**", "Tom now has 42 (forty-two) marbles.",
    "First we add: 17 + 25 = 42.\n\nIn total, Tom has 42 marbles.",
    # full-width digits
    "The answer is ４２.", "\\boxed{４２}",
])
def test_right_answers_in_model_styles_are_paid(response: str) -> None:
    assert _paid(response) == (True, True)


def test_a_spelled_out_decimal_and_a_dollar_sentence_are_paid() -> None:
    ben = "Ben buys 3 notebooks at $4.50 each. How much does he spend in dollars?"
    assert _paid("The answer is 13.5 (thirteen and a half).", "13.5", ben) == (True, True)
    assert _paid("3 x 4.50 = 13.50.\nTherefore, Ben spends $13.50 on notebooks.", "13.5", ben) == (True, True)


@pytest.mark.parametrize("response", [
    # a prose sentence with two different numbers
    "So, Tom has 43 marbles and 42 cars.", "So, Tom has 42 marbles and 43 cars.", "Tom gave 43 away and has 42 marbles.",
    "So, Tom has 42 marbles and forty-three cars.", "So, Tom has forty-three (42) marbles.",
    "So, Tom has about 42 marbles.", "So, Tom may have 42 marbles.", "Does Tom have 42 marbles?",
    # a unit answer hedged between two values
    "The answer is 42 or 43 cm.", "The answer is 43 cm or 42 cm.", "\\boxed{43\\,\\text{cm} \\text{ or } 42\\,\\text{cm}}",
    "\\boxed{42\\,\\text{cm} 43}", "The answer is 42 cm 43 mm.", "\\boxed{42 \\text{ cm}, 43 \\text{ cm}}",
    # a spelled-out form that differs from the number
    "The answer is 42 (forty-three).", "The answer is 43 (forty-two).", "\\boxed{42} (forty-three)",
    # a check on the answer line that ends with another number
    "The answer is 42. Check: 17 + 25 = 43.", "The answer is 43. Check: 17 + 25 = 42.", "\\boxed{42}. Or 43.",
    # full-width digits beside another number
    "The answer is 43 (４２).",
])
def test_hacks_on_the_new_leniencies_are_refused(response: str) -> None:
    assert _paid(response) == (False, False)


def test_number_words() -> None:
    assert [spelled_value(w) for w in ("forty-two", "forty two", "one hundred thirty-five", "thirteen and a half",
                                       "twelve", "zero")] == [42, 42, 135, 13.5, 12, 0]
    assert spelled_value("forty-two marbles") is None and spelled_value("") is None
    assert [number_in_words(n) for n in (0, 7, 42, 135, 1250)] == [
        "zero", "seven", "forty-two", "one hundred thirty-five", "one thousand two hundred fifty"]


def test_the_corpus_is_paid_and_the_hacks_are_not() -> None:
    rows = load_correct_responses()
    assert len(rows) >= 300
    report = measure(rows, hack_instances=2)
    assert report["hacks_rewarded"] == 0, report["rewarded_hacks"][:5]
    assert report["correct_refused"] < 0.01 * report["correct_tried"], report["refused_correct"][:5]
