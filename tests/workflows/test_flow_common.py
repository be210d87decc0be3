"""Parsers and helpers shared by the flow workflows, on well- and ill-formed text."""

from __future__ import annotations

import pytest

from teamrl.workflows.flow_common import compact_tag, parse_choice, parse_strategies, parse_verdict


@pytest.mark.parametrize("text, expected", [
    ("1", 1), (" 2\n", 2), ("\\boxed{0}", 0), ("I pick the second.\n\\boxed{1}", 1), ("Answer: 2", 2),
    ("answer #1", 1), ("I choose answer 0 because it checks out.", 0), ("My choice is 2.", 2),
    ("3", None), ("\\boxed{5}", None), ("-1", None), ("", None), ("first", None), ("\\boxed{", None),
    ("12", None), (None, None), ("0 or 1", None),
])
def test_parse_choice(text, expected):
    assert parse_choice(text, 3) == expected


@pytest.mark.parametrize("text, verdict, feedback", [
    ("ok", True, ""), ("no", False, ""), ("no order is left to right", False, "order is left to right"),
    ("\\boxed{Correct}", True, ""), ("\\boxed{Incorrect} The sign is wrong.", False, "The sign is wrong."),
    ("Correct.", True, ""), ("Incorrect: 18-6 is 12", False, "18-6 is 12"), ("I", False, ""),
    ("maybe", None, "maybe"), ("", None, ""), ("\\boxed{20}", None, "\\boxed{20}"), (None, None, ""),
])
def test_parse_verdict(text, verdict, feedback):
    assert parse_verdict(text) == (verdict, feedback)


def test_parse_strategies():
    assert parse_strategies("l r l", 3) == (["l", "r", "l"], True)
    assert parse_strategies("1. add\n2. subtract\n3. check", 3) == (["add", "subtract", "check"], True)
    assert parse_strategies("Strategy 1: a b\nStrategy 2: c\nStrategy 3: d e", 3) == (["a b", "c", "d e"], True)
    assert parse_strategies("split\nmerge", 3) == (["split", "merge", ""], False)
    assert parse_strategies("", 3) == (["", "", ""], False)
    assert parse_strategies(None, 2) == (["", ""], False)
    four, ok = parse_strategies("a b c d", 3)  # four words for three workers: not a plan for them
    assert four == ["a", "b", "c"] and not ok


def test_compact_tags():
    assert [compact_tag(n) for n in ("generator_0", "worker_2", "debater_11", "aggregator", "generator", "x")] == \
        ["g0", "w2", "d11", "agg", "g", "x"]
