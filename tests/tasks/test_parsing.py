"""Tests for the parsers of teamrl.tasks (code_blocks, math_parsing, plan_parsing): examples from real model output plus hypothesis fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teamrl.tasks.code_blocks import extract_code_block
from teamrl.tasks.math_parsing import extract_boxed, extract_final_answer
from teamrl.tasks.plan_parsing import parse_action_list, parse_int_grid

FUZZ = settings(max_examples=300, deadline=None)


# --------------------------------------------------------------------------- code blocks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```python\nprint(1)\n```", "print(1)"),
        ("Sure!\n```py\ndef f():\n    return 2\n```\nThis returns 2.", "def f():\n    return 2"),
        ("```\nx = 1\n```", "x = 1"),
        ("```python\nx = 1\n", "x = 1"),  # unclosed, generation cut off
        ("```python\nfirst = 1\n```\ntext\n```python\nsecond = 2\n```", "second = 2"),
        ("```python\ncode = 1\n```\nOutput:\n```text\n1\n```", "code = 1"),
        ("```bash\npip install x\n```\n```\ny = 2\n```", "y = 2"),
        ("```python print(3)```", "print(3)"),
        ("1. Step:\n   ```python\n   a = 1\n   b = 2\n   ```", "a = 1\nb = 2"),
        ("~~~python\nz = 3\n~~~", "z = 3"),
        ("<code>if a &lt; b:\n    pass</code>", "if a < b:\n    pass"),
        ("[PYTHON]\nq = 4\n[/PYTHON]", "q = 4"),
        ("def g(x):\n    return x * 2\n", "def g(x):\n    return x * 2"),
        ("```python\n\n```\n```python\nw = 5\n```\n```python\n```", "w = 5"),
        ("```Python\nu = 6\n```", "u = 6"),
        ("```python\r\nv = 7\r\n```", "v = 7"),
    ],
)
def test_extract_code_block_examples(text: str, expected: str) -> None:
    assert extract_code_block(text) == expected


@pytest.mark.parametrize(
    "text", ["", "   ", "I cannot solve this.", "The answer is 5.", "```\n```", "```", "<code></code>"]
)
def test_extract_code_block_none(text: str) -> None:
    assert extract_code_block(text) is None


def test_extract_code_block_other_language() -> None:
    text = "```python\np = 1\n```\n```js\nlet p = 1;\n```"
    assert extract_code_block(text, language="js") == "let p = 1;"
    assert extract_code_block(text, language=None) == "let p = 1;"
    # Only a block in another language: still returned, lowest preference.
    assert extract_code_block("```bash\nls\n```") == "ls"


@FUZZ
@given(st.text())
def test_extract_code_block_never_raises(text: str) -> None:
    result = extract_code_block(text)
    assert result is None or (isinstance(result, str) and result == result.strip() and result)


_code_line = st.text(
    alphabet=st.characters(blacklist_characters="`~\r\n", blacklist_categories=("Cs",)), min_size=1
).filter(lambda s: s.strip())


@FUZZ
@given(st.lists(_code_line, min_size=1, max_size=5), st.sampled_from(["python", "py", ""]), st.text(alphabet="abc .\n"))
def test_extract_code_block_round_trip(lines: list[str], tag: str, prose: str) -> None:
    code = "\n".join(line.strip() for line in lines)
    text = f"{prose}\n```{tag}\n{code}\n```\n{prose}"
    assert extract_code_block(text) == code.strip()


# --------------------------------------------------------------------------- boxed / final answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{18}", "18"),
        (r"so $\boxed{\frac{1}{2}}$.", r"\frac{1}{2}"),
        (r"\boxed{1} then \boxed{2}", "2"),
        (r"\fbox{x+1}", "x+1"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
        (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)"),
        (r"\boxed{7} and then \boxed{\frac{1}{", "7"),  # truncated last box skipped
        (r"\boxed 5$", "5"),
        (r"\boxed{ 9 }", "9"),
    ],
)
def test_extract_boxed(text: str, expected: str) -> None:
    assert extract_boxed(text) == expected


@pytest.mark.parametrize("text", ["", "boxed{3}", r"\boxed{", r"\boxed{}", r"\boxedx{3}", "}{"])
def test_extract_boxed_none(text: str) -> None:
    assert extract_boxed(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 18.", "18"),
        ("So the answer is $18.", "18"),
        ("Janet makes 9 * 2 = 18.\n#### 18", "18"),
        ("Answer: 42", "42"),
        ("**Final Answer:** 3.5.", "3.5"),
        ("The final answer is: $\\frac{3}{4}$. I hope it is correct.", r"\frac{3}{4}"),
        ("Final Answer: The final answer is $(3,4]$. I hope it is correct.", "(3,4]"),
        (r"Final answer: \(x^2\)", "x^2"),
        ("**Final Answer**\n\n18", "18"),
        ("The answer is 1,000 dollars.", "1,000 dollars"),
        ("#### 1,000", "1000"),
        ("It costs $1,250.", "1250"),  # a last sentence stating one number states the answer
        ("It costs $1,250 or $1,300.", None),  # ... two numbers (or a hedge word) none
        ("so -5", "-5"),
        ("x = -3", "x = -3"),
        ("so 3 + 4 = 7", "7"),
        ("12-5=7, 7+3=10", "10"),
        ("half: 1/2", "1/2"),
        (r"the total is $\frac{14}{3}$", r"\frac{14}{3}"),  # never the 3 inside it
        (r"The answer is 5 but \boxed{6}", "6"),
        ("The answer is 5.\nAnswer: 6\nThen I added 2 more", "6"),
        (r"The answer is \$18.", "18"),
        ("So the answer is $x^2.$ Then we stop", "x^2"),
        ("<think>It is 5.</think>\nThe answer is 6.", "6"),
        ("answer is ", None),
        ("no numbers here", None),
        ("First 3, then 4, so 7 apples", None),  # no marker, and the last line is not an answer
        ("", None),
    ],
)
def test_extract_final_answer(text: str, expected: str | None) -> None:
    assert extract_final_answer(text) == expected


def test_extract_final_answer_without_last_line() -> None:
    assert extract_final_answer("2 + 2 = 4", last_line_fallback=False) is None
    assert extract_final_answer("2 + 2 = 4. Answer: 4", last_line_fallback=False) == "4"


@FUZZ
@given(st.text())
def test_answer_parsers_never_raise(text: str) -> None:
    for result in (extract_boxed(text), extract_final_answer(text)):
        assert result is None or (isinstance(result, str) and result)


@FUZZ
@given(st.integers(-10**12, 10**12), st.sampled_from(["The answer is {}.", "#### {}", "Answer: ${}$", "\\boxed{{{}}}", "so {}"]))
def test_final_answer_round_trip_int(n: int, template: str) -> None:
    expected = str(n)  # "so 18": a last sentence that states one number states the answer
    assert extract_final_answer("Some work 1 + 2 = 3.\n" + template.format(n)) == expected


_latex_atom = st.sampled_from(["x", "1", r"\pi", r"\frac{1}{2}", r"\sqrt{3}", "y^2", r"\{a\}"])
_latex = st.recursive(_latex_atom, lambda inner: st.builds(lambda a, b: "{" + a + "}+" + b, inner, inner), max_leaves=8)


@FUZZ
@given(_latex, st.text(alphabet="ab $\n."))
def test_boxed_round_trip(expr: str, prose: str) -> None:
    assert extract_boxed(f"{prose}\\boxed{{{expr}}}{prose}") == expr


# --------------------------------------------------------------------------- actions

MOVES = {
    "U": "U", "UP": "U", "D": "D", "DOWN": "D",
    "L": "L", "LEFT": "L", "R": "R", "RIGHT": "R",
}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("RRDD", ["R", "R", "D", "D"]),
        ("R R D D", ["R", "R", "D", "D"]),
        ("right, right, down", ["R", "R", "D"]),
        ("['R','D']", ["R", "D"]),
        ('["up", "left"]', ["U", "L"]),
        ("Actions: U,L", ["U", "L"]),
        ("rrdd", ["R", "R", "D", "D"]),
        ("upupleft", ["U", "U", "L"]),
        ("I think about it: go Right then Down.\nMoves: L L", ["L", "L"]),
        ("R -> R -> D", ["R", "R", "D"]),
        ("1. up\n2. down", ["U", "D"]),
        ("", []),
        ("nothing useful", []),
    ],
)
def test_parse_action_list(text: str, expected: list[str]) -> None:
    assert parse_action_list(text, MOVES) == expected


def test_parse_action_list_stop_on_unknown() -> None:
    assert parse_action_list("R R jump D", MOVES, on_unknown="stop") == ["R", "R"]
    assert parse_action_list("R R jump D", MOVES) == ["R", "R", "D"]
    with pytest.raises(ValueError, match="on_unknown"):
        parse_action_list("R", MOVES, on_unknown="explode")  # type: ignore[arg-type]


def test_parse_action_list_symbol_aliases() -> None:
    arrows = {"^": "U", "v": "D", "<": "L", ">": "R"}
    assert parse_action_list("^ ^ > v <", arrows) == ["U", "U", "R", "D", "L"]


@FUZZ
@given(st.text(), st.sampled_from(["skip", "stop"]))
def test_parse_action_list_never_raises(text: str, mode: str) -> None:
    result = parse_action_list(text, MOVES, on_unknown=mode)  # type: ignore[arg-type]
    assert all(a in {"U", "D", "L", "R"} for a in result)


_WORDS = {"U": ["U", "up", "Up"], "D": ["d", "DOWN"], "L": ["L", "left"], "R": ["r", "Right"]}


@FUZZ
@given(
    st.lists(st.sampled_from("UDLR"), max_size=20),
    st.sampled_from([" ", ", ", ",", " -> ", "\n", "' , '"]),
    st.data(),
)
def test_parse_action_list_round_trip(actions: list[str], sep: str, data: st.DataObject) -> None:
    spelled = [data.draw(st.sampled_from(_WORDS[a])) for a in actions]
    assert parse_action_list("Actions: " + sep.join(spelled), MOVES) == actions
    assert parse_action_list("".join(actions), MOVES) == actions


# --------------------------------------------------------------------------- grids

GRID4 = [[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]


@pytest.mark.parametrize(
    "text",
    [
        "1234\n3412\n2143\n4321",
        "Solution:\n1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1\nDone.",
        "```\n1 2 | 3 4\n3 4 | 1 2\n----+----\n2 1 | 4 3\n4 3 | 2 1\n```",
        "| 1 | 2 | 3 | 4 |\n|---|---|---|---|\n| 3 | 4 | 1 | 2 |\n| 2 | 1 | 4 | 3 |\n| 4 | 3 | 2 | 1 |",
        "[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]",
        "The grid is 1234 3412 2143 4321",
        "1234341221434321",
        "Puzzle:\n1 0 0 4\n0 0 1 0\n0 1 0 0\n4 0 0 1\n\nSolved:\n1234\n3412\n2143\n4321\n",
        "[[0,0,0,0],[0,0,0,0],[0,0,0,0],[0,0,0,0]]\nfixed:\n1,2,3,4\n3,4,1,2\n2,1,4,3\n4,3,2,1",
    ],
)
def test_parse_int_grid(text: str) -> None:
    assert parse_int_grid(text, 4) == GRID4


@pytest.mark.parametrize("text", ["", "1234\n3412\n2143", "12 34\n56", "[[1,2],[3,4]]", "no grid"])
def test_parse_int_grid_none(text: str) -> None:
    assert parse_int_grid(text, 4) is None


def test_parse_int_grid_bad_size() -> None:
    with pytest.raises(ValueError, match="positive int"):
        parse_int_grid("1", 0)


@FUZZ
@given(st.text(), st.integers(1, 9))
def test_parse_int_grid_never_raises(text: str, size: int) -> None:
    grid = parse_int_grid(text, size)
    assert grid is None or (len(grid) == size and all(len(row) == size for row in grid))


@FUZZ
@given(st.integers(1, 9).flatmap(lambda n: st.lists(st.lists(st.integers(1, 9), min_size=n, max_size=n), min_size=n, max_size=n)),
       st.sampled_from(["", " ", ","]))
def test_parse_int_grid_round_trip(grid: list[list[int]], sep: str) -> None:
    text = "Here you go:\n" + "\n".join(sep.join(str(x) for x in row) for row in grid) + "\n"
    assert parse_int_grid(text, len(grid)) == grid
    assert parse_int_grid(str(grid), len(grid)) == grid


def test_model_code_parses_without_syntax_warnings(recwarn, capfd):
    """`1if x` and `"\\d"` make Python print SyntaxWarnings; model output must not flood the log with them."""
    from teamrl.tasks.code_blocks import parse_python

    assert extract_code_block("print(1if 1 else 2)") == "print(1if 1 else 2)"
    parse_python('x = "\\d"')
    assert not [w for w in recwarn if issubclass(w.category, SyntaxWarning)]
    assert "SyntaxWarning" not in capfd.readouterr().err
