"""Tests for teamrl.tasks.parsing: examples from real model output plus hypothesis fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teamrl.tasks.parsing import extract_code_block

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
