"""The answer-style grammar and the four math graders' rates on it (`python -m teamrl.probes.math_styles`)."""

from __future__ import annotations

import pytest

from teamrl.probes.answer_styles import (
    FAMILIES,
    HELD_OUT,
    TUNING,
    echo_cases,
    load_questions,
    style_cases,
)
from teamrl.probes.math_styles import GRADERS, grade_cases, main, rates

pytest.importorskip("math_verify")

COUNT = 800  # correct answers (and as many wrong ones): ~600 of them in held-out families


@pytest.fixture(scope="module")
def measured() -> dict:
    questions = load_questions()
    cases = [*style_cases(questions, COUNT, seed=1), *echo_cases(questions, seed=1)]
    return rates(grade_cases(cases, questions))


def test_families_are_split_once_and_every_family_is_generated() -> None:
    names = {name for table in FAMILIES.values() for name in table}
    assert HELD_OUT & TUNING == set()
    assert names <= HELD_OUT | TUNING
    questions = load_questions()
    seen = {family for case in style_cases(questions, 3000) for family in case.families}
    assert names - seen == set()
    assert {f for case in echo_cases(questions) for f in case.families} <= HELD_OUT | TUNING


def test_the_grammar_is_deterministic_given_the_seed() -> None:
    questions = load_questions()
    first = [c.response for c in style_cases(questions, 50, seed=7)]
    assert first == [c.response for c in style_cases(questions, 50, seed=7)]
    assert first != [c.response for c in style_cases(questions, 50, seed=8)]


@pytest.mark.parametrize("grader", GRADERS)
def test_held_out_families_correct_refused_under_one_percent(measured: dict, grader: str) -> None:
    failed, tried = measured["totals"][("held-out", "correct", grader)]
    assert tried >= 400
    assert failed < 0.01 * tried, [c.response[-80:] for c, g in measured["failures"] if grader in g][:5]


@pytest.mark.parametrize("grader", GRADERS)
@pytest.mark.parametrize("split", ["tuning", "held-out"])
def test_no_wrong_or_echoed_answer_is_rewarded(measured: dict, grader: str, split: str) -> None:
    for kind in ("wrong", "echo"):
        failed, tried = measured["totals"][(split, kind, grader)]
        assert tried > 0 and failed == 0, (kind, [c.response[-80:] for c, g in measured["failures"] if grader in g][:5])


def test_command_prints_rates_per_grader_and_family(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--count", "40", "--failures", "0"]) in (0, 1)
    out = capsys.readouterr().out
    assert "held-out: correct refused" in out and "answers_match" in out and "per family" in out
