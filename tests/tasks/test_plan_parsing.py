"""The plan verifiers' parsers (`parse_plan`, `int_grids`, `is_follow`): accepted and refused styles,
properties, and bounded time on adversarial text (contract: docs/verifiers/plans.md)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teamrl.tasks.plan_parsing import int_grids, parse_action_list, parse_int_grid, parse_plan
from teamrl.workflows.plan_path_team import MOVE_ALIASES
from teamrl.workflows.tool_plan import is_follow

FEW = settings(max_examples=30, deadline=None)
RRDD = ["R", "R", "D", "D"]


@pytest.mark.parametrize("text", [
    "RRDD", "rrdd", "RrDd", "R R D D", "R, R, D, D", "R,R,D,D", "right, right, down, down", "RIGHT RIGHT DOWN DOWN",
    "['R', 'R', 'D', 'D']", '["right", "right", "down", "down"]', "R -> R -> D -> D", "R → R → D → D",
    "(R, R, D, D)", "R; R; D; D", "RRDD.", "**RRDD**", "`RRDD`", "rightrightdowndown",
    "Moves: RRDD", "moves=RRDD", "Answer: R R D D", "Final answer: RRDD", "Path: right, right, down, down.",
    "Solution:\nRRDD", "Plan:\n\n  RRDD", "I will go: RRDD", "Let me think.\nThe goal is below.\nRRDD",
    "```\nRRDD\n```", "```text\nRRDD\n```", "Moves: RRDD\nThat is four moves.", "RRDD\nAnswer: RRDD",
    "Thinking: DDRR might hit a wall.\nMoves: RRDD", "DDRR\nAnswer: RRDD", "Path length: 4\nRRDD",
])
def test_parse_plan_accepts(text: str) -> None:
    assert parse_plan(text, MOVE_ALIASES) == RRDD


@pytest.mark.parametrize("text", [
    "", "   ", "\n\n", "nothing useful", "RRDD or DDRR", "RRDD/DDRR", "R/D", "RR | DD", "RRDD?",
    "RRDD\nDDRR", "Moves: RRDD\nMoves: DDRR", "Answer: RRDD\nSolution: DDRR", "go right then down",
    "I'd go RRDD", "RRDD (or maybe DDRR)", "RRDD, not DDRR", "R2D2", "4 moves", "RRDD x2", "Answer: banana",
    "Answer: RRDD or DDRR", "Step 1: R\nStep 2: D", "follow", "```python\nprint('RRDD')\n```",
])
def test_parse_plan_refuses(text: str) -> None:
    assert parse_plan(text, MOVE_ALIASES) is None


def test_parse_plan_refuses_what_the_lenient_parser_concatenates() -> None:
    # The reason the workflows moved off parse_action_list: it reads a hedge as one long plan.
    assert parse_action_list("RRDD or DDRR", MOVE_ALIASES) == RRDD + ["D", "D", "R", "R"]
    assert parse_plan("RRDD or DDRR", MOVE_ALIASES) is None


@pytest.mark.parametrize("text", [
    "follow", "Follow", "FOLLOW", "follow.", "Follow!", "'follow'", "**follow**", "`follow`", "  follow  \n",
    "```\nfollow\n```", "```text\nfollow\n```", "Answer: follow", "plan = follow", "Final answer: follow",
])
def test_is_follow_accepts(text: str) -> None:
    assert is_follow(text)


@pytest.mark.parametrize("text", [
    "", "follow, or RRDD", "follow RRDD", "follow\nRRDD", "I will follow the tool", "followRRDD",
    "don't follow", "follow?", "follow or not", "unfollow", "RRDD", None, 3,
])
def test_is_follow_refuses(text: object) -> None:
    assert not is_follow(text)  # type: ignore[arg-type]


G = [[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]
P = [[1, 0, 0, 4], [0, 0, 1, 0], [0, 1, 0, 0], [4, 0, 0, 1]]


@pytest.mark.parametrize("text, grids", [
    ("1234 3412 2143 4321", [G]),
    ("Puzzle:\n1004\n0010\n0100\n4001\nSolution:\n1234\n3412\n2143\n4321", [P, G]),
    ("1004\n0010\n0100\n4001\n1234\n3412\n2143\n4321", [P, G]),  # one run of 8 rows: two grids
    ("0 1 2 3\n1234\n3412\n2143\n4321", [G]),  # a column header row is dropped
    ("[[1, 2, 3, 4],\n [3, 4, 1, 2],\n [2, 1, 4, 3],\n [4, 3, 2, 1]]", [G, G]),  # printed literal: rows and literal
    (f"{P}\n1234 3412 2143 4321", [P, G]),
    ("9" * 19 + " 2 3 4\n3412\n2143\n4321", []),  # a 19-digit value is no value: not a grid
    ("[[" + "9" * 5000 + ", 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]", []),
    ("1" * 5000 + " 2 3 4", []),
])
def test_int_grids(text: str, grids: list) -> None:
    assert int_grids(text, 4) == grids
    assert parse_int_grid(text, 4) == (grids[-1] if grids else None)


# --------------------------------------------------------------------------- properties

_SPELLINGS = {"U": ["U", "u", "up", "Up"], "D": ["D", "d", "down"], "L": ["L", "left", "LEFT"], "R": ["R", "right"]}


@FEW
@given(st.lists(st.sampled_from("UDLR"), min_size=1, max_size=30), st.sampled_from([" ", ", ", " -> ", ";", ""]),
       st.sampled_from(["", "Moves: ", "Answer:\n", "Thinking.\n"]), st.data())
def test_parse_plan_round_trip(moves: list[str], sep: str, prefix: str, data: st.DataObject) -> None:
    spelled = [data.draw(st.sampled_from(_SPELLINGS[m] if sep else [m])) for m in moves]
    assert parse_plan(prefix + sep.join(spelled), MOVE_ALIASES) == moves


@FEW
@given(st.lists(st.sampled_from("UDLR"), min_size=1, max_size=12), st.lists(st.sampled_from("UDLR"), min_size=1,
       max_size=12), st.sampled_from(["\n", " or ", "/", "\nMoves: "]))
def test_parse_plan_never_takes_two_different_plans(a: list[str], b: list[str], joint: str) -> None:
    result = parse_plan("Moves: " + "".join(a) + joint + "".join(b), MOVE_ALIASES)
    if joint == "\n":  # a labelled plan outranks an unlabelled line
        assert result == a
    else:  # two labelled plans must agree; a hedge on one line is prose
        assert result == (a if a == b and joint == "\nMoves: " else None)


@FEW
@given(st.text(max_size=300))
def test_parse_plan_and_follow_never_raise(text: str) -> None:
    result = parse_plan(text, MOVE_ALIASES)
    assert result is None or (result and set(result) <= set("UDLR"))
    assert isinstance(is_follow(text), bool)


@FEW
@given(st.text(max_size=300), st.integers(1, 9))
def test_int_grids_never_raise_and_have_the_shape(text: str, size: int) -> None:
    assert all(len(g) == size and all(len(r) == size for r in g) for g in int_grids(text, size))


# --------------------------------------------------------------------------- bounded time

ADVERSARIAL = [
    "moves" + " " * 200_000 + "x", "Moves:" * 30_000, "R" * 200_000, "RIGHT" * 40_000, "R " * 100_000,
    "\n" * 200_000, ":" * 200_000, "[[1]" + " " * 200_000, "[[1]," + " ," * 100_000, "[[" * 100_000,
    "[" + "[1, 2, 3, 4]," * 15_000, "1" * 200_000, "1 " * 100_000, "1234\n" * 40_000, "follow " * 30_000,
    "a" * 200_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: f"{t[:8]!r}x{len(t)}")
def test_parsers_finish_fast_on_200k_adversarial_text(text: str) -> None:
    # A quadratic regex takes minutes here (the old grid literal took ~0.5 s for 8k spaces, growing
    # 4x per doubling); the bound is loose for a loaded machine and still far below that.
    start = time.perf_counter()
    parse_plan(text, MOVE_ALIASES)
    parse_action_list(text, MOVE_ALIASES)
    is_follow(text)
    int_grids(text, 4)
    int_grids(text, 9)
    assert time.perf_counter() - start < 20.0
