"""The code verifier's contract (docs/verifiers/code.md): which responses are programs, which tests count."""

from __future__ import annotations

import ast
import copy
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teamrl.tasks.code_data import CodeProblem
from teamrl.tasks.code_blocks import code_blocks, extract_code_block
from teamrl.workflows.code_parsing import counts_as_unit, parse_program, parse_tests, program_context
from teamrl.workflows.code_runner import UnitRun
from teamrl.workflows.code_team import CodeWorkflow
from teamrl.workflows.math_team import ProblemSplits

FEW = settings(max_examples=40, deadline=None)
PROMPT = 'from typing import List\n\n\ndef _helper(x):\n    return x\n\n\ndef total(xs: List[int]) -> int:\n    """Sum."""\n'
HE = CodeProblem("hand/he", PROMPT, PROMPT + "    return sum(xs)\n", "assert total([1, 2]) == 3\n", "total",
                 source="humaneval")
MBPP = CodeProblem("hand/mbpp", "Write a function total that sums a list.", "def total(xs):\n    return sum(xs)\n",
                   "assert total([1, 2]) == 3\n", "total", source="mbpp")


def defines_total(program: str) -> bool:
    scope: dict = {}
    exec(compile(program, "<test>", "exec"), scope)  # noqa: S102 - our own test programs
    return scope["total"]([1, 2, 3]) == 6


NESTED_BODY = "    def add(a, b):\n        return a + b\n    out = 0\n    for x in xs:\n        out = add(out, x)\n    return out\n"
ACCEPTED = {
    "fenced full program": f"Here:\n```python\n{PROMPT}    return sum(xs)\n```\nDone.",
    "function only (prompt's import needed)": "```python\ndef total(xs: List[int]) -> int:\n    return _helper(sum(xs))\n```",
    "body only": "    return sum(xs)\n",
    "body starting with a nested helper def": NESTED_BODY,
    "fenced body with a nested helper def": "```python\n" + NESTED_BODY + "```",
    "body, first line's indentation lost": NESTED_BODY.strip(),
    "tab-indented body": "\tout = 0\n\tfor x in xs:\n\t\tout += x\n\treturn out\n",
    "body then a column-0 main block": "    return sum(xs)\n\nif __name__ == '__main__':\n    print(total([1]))\n",
    "decorated": "```python\nimport functools\n\n@functools.lru_cache(None)\ndef _s(t):\n    return sum(t)\n\n"
                 "def total(xs):\n    return _s(tuple(xs))\n```",
    "class entry point": "```python\nclass total:\n    def __new__(cls, xs):\n        return sum(xs)\n```",
    "lambda assignment": "total = lambda xs: sum(xs)",
    "defined under if/try": "```python\ntry:\n    import numpy\nexcept ImportError:\n    pass\nif True:\n"
                            "    def total(xs):\n        return sum(xs)\n```",
    "solution first, usage block last": "```python\ndef total(xs):\n    return sum(xs)\n```\nUse:\n```python\nprint(total([1]))\n```",
    "fenced body assigning the function's own name": "```python\ntotal = sum(xs)\nreturn total\n```",
    "from __future__ import first": "```python\nfrom __future__ import annotations\n\ndef total(xs: List[int]) -> int:\n"
                                    "    return sum(xs)\n```",
    "helpers after, main guard, type hints": "```py\ndef total(xs: list[int]) -> int:\n    '''Doc.'''\n    return _add(xs)\n\n"
                                             "def _add(xs):\n    return sum(xs)\n\nif __name__ == '__main__':\n    total([1])\n```",
}


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_every_program_shape_is_accepted_and_runs(name):
    for problem in (HE, MBPP):
        program, ok = parse_program(ACCEPTED[name], problem)
        if problem is MBPP and "prompt's import" in name:
            continue  # MBPP prompts are prose: nothing runs before the program
        assert ok, (name, problem.id, program)
        assert defines_total(program), (name, program)


def test_nested_helper_body_was_the_reported_defect():
    program, ok = parse_program(NESTED_BODY, HE)
    assert ok and program == PROMPT.rstrip() + "\n" + NESTED_BODY  # prompt + completion, as HumanEval runs it


REFUSED = {
    "empty": "", "prose": "I cannot solve this.", "wrong name": "def summe(xs):\n    return sum(xs)",
    "body without return": "    print(xs)\n", "bare word": "hello", "only under the main guard":
    "if __name__ == '__main__':\n    def total(xs):\n        return sum(xs)", "syntax error": "```python\ndef total(:\n```",
    "nested def only": "    def total2(xs):\n        return sum(xs)\n",
    "parses but does not compile": "```python\nbreak\ndef total(xs):\n    return sum(xs)\n```",
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_responses_without_a_program_are_refused(name):
    for problem in (HE, MBPP):
        assert not parse_program(REFUSED[name], problem)[1], (name, problem.id)


def test_prompt_context_is_the_prompt_only_when_it_is_code():
    assert program_context(HE) == PROMPT and program_context(MBPP) == ""
    # An MBPP body completes the signature the agents are shown, and nothing runs before it.
    assert parse_program("    return sum(xs)", MBPP) == ("def total(xs):\n    return sum(xs)\n", True)


@FEW
@given(st.text(alphabet=st.sampled_from(list("`~\n ()[]{}:=#'\"\\\tdefreturnpy<>@")), max_size=300))
def test_parsers_never_raise(text):
    for problem in (HE, MBPP):
        program, ok = parse_program(text, problem)
        assert isinstance(program, str) and isinstance(ok, bool)
        if ok:
            ast.parse(program)
    steps, ok = parse_tests(text, "total")
    assert isinstance(steps, tuple) and isinstance(ok, bool)


@FEW
@given(st.lists(st.sampled_from(["python", "py", "", "text"]), min_size=1, max_size=12), st.data())
def test_the_last_python_block_that_is_a_program_wins(tags, data):
    blocks = [f"```{tag}\nv = {i}\n```" for i, tag in enumerate(tags)]
    solution = data.draw(st.integers(0, len(tags) - 1))
    blocks[solution] = f"```{tags[solution]}\ndef total(xs):\n    return sum(xs) + {solution}\n```"
    program, ok = parse_program("\nprose\n".join(blocks), MBPP)
    assert ok and f"+ {solution}" in program
    ranked = code_blocks("\n".join(blocks))
    assert ranked[0] == extract_code_block("\n".join(blocks)) and len(ranked) == len(tags)


@pytest.mark.parametrize("text", ["(" * 100_000, "-" * 100_000 + "1", "a" + ".b" * 50_000,
                                  "```python\n" + "not " * 50_000 + "x\n```", "def f(x):\n    return " + "9" * 100_000,
                                  "```\n" * 50_000, "<code" * 80_000],
                         ids=["parens", "unary minus", "attributes", "not", "huge int", "fences", "code tags"])
def test_absurd_inputs_are_no_program_not_a_crash(text):
    assert parse_program(text, HE)[1] is False and parse_program(text, MBPP)[1] is False
    assert parse_tests(text, "total")[1] is False


def test_deep_but_legal_nesting_is_a_program():
    body = "    return " + "[" * 150 + "]" * 150  # under the parser's nesting limit of 200
    assert parse_program(body, HE)[1] and isinstance(parse_tests("assert total(" + body + ")", "total")[1], bool)


def test_code_tags_without_a_closing_bracket_are_linear():
    start = time.perf_counter()
    assert extract_code_block("<code" * 80_000) is None  # 400k chars; the quadratic regex took minutes
    assert time.perf_counter() - start < 5.0


# ----------------------------------------------------------------------------- tester units


@pytest.mark.parametrize(("source", "unit"), [
    ("assert f(1) == 2", True), ("assert all(f(x) == x for x in [1])", True),
    ("try:\n    f(-1)\n    assert False\nexcept ValueError:\n    pass", True),  # expects a ValueError: a real test
    ("assert True", False), ("assert 1 == 1", False), ("assert f(1) == f(1)", False), ("assert f(1) == 2 or True", False),
    ("try:\n    assert f(1) == 2\nexcept:\n    pass", False), ("try:\n    assert f(1) == 2\nexcept Exception:\n    pass", False),
    ("try:\n    assert f(1) == 2\nexcept (ValueError, AssertionError):\n    pass", False),
    ("with contextlib.suppress(AssertionError):\n    assert f(1) == 2", False), ("def g():\n    assert f(1) == 2", False),
])
def test_what_counts_as_a_unit(source, unit):
    assert counts_as_unit(ast.parse(source).body[0], {"f"}) is unit


def test_tests_that_define_their_own_function_stop_counting():
    steps, ok = parse_tests("assert f(1) == 2\nf = lambda x: 2\nassert f(1) == 2", "f")
    assert [u for _, u in steps] == [True, False, False] and ok


class FlakyRunner:
    """The reference passes its first run and fails its second: what a random test does sometimes."""

    def ground_truth(self, jobs):
        return [(1.0 if program == MBPP.reference_solution else 0.0, "ok") for program, _ in jobs]

    def run_units(self, jobs):
        return [UnitRun([not (program == MBPP.reference_solution and steps[-1] == ("pass", False))], [""], True)
                for program, steps in jobs]

    def close(self):
        pass


def test_a_test_must_pass_the_reference_twice():
    wf = CodeWorkflow(ProblemSplits([MBPP], [MBPP]), runner=FlakyRunner(), n_mutants=2)
    wf._mutants[(MBPP.id, MBPP.reference_solution)] = ["def total(xs):\n    return 0\n"]
    out = wf.apply("tester", copy.deepcopy(wf.new_state("train", 0)), "assert total([1]) == 1")
    assert out.terms["separation"] == -1.0 and out.local == -1.0
