"""Fuzzing the code parsers with adversarial text: no crash, no hang, bounded time.

Every parser that reads model-written code is fed inputs from adversarial generators (many
fences, unclosed fences, long runs of one character, deep nesting of brackets / operators /
indentation, huge literals, random code fragments, `<code` tags), from the longest response a
config allows (`rollout.max_new_tokens` <= 40 tokens, ~8 chars a token: ~320 chars) up to 200k
characters. A crash is any exception (the parsers must return "no program" instead); the
slowest input per parser is reported in CPU seconds (robust to a loaded machine).

    python -m scripts.checks.fuzz_code [--n 500] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Callable

from scripts.checks.fuzzing import print_rows, run_parsers

from teamrl.tasks.code_data import CodeProblem
from teamrl.tasks.code_blocks import code_blocks, extract_code_block
from teamrl.workflows.code_parsing import parse_program, parse_tests

MAX_LEN = 200_000
HUMANEVAL_LIKE = CodeProblem("fuzz/0", 'from typing import List\n\n\ndef f(xs: List[int]) -> int:\n    """Sum."""\n',
                             "def f(xs):\n    return sum(xs)\n", "assert f([1]) == 1\n", "f", source="fuzz")
MBPP_LIKE = CodeProblem("fuzz/1", "Write a function f that sums a list.", "def f(xs):\n    return sum(xs)\n",
                        "assert f([1]) == 1\n", "f", source="mbpp")

PARSERS: dict[str, Callable[[str], object]] = {
    "extract_code_block": extract_code_block,
    "code_blocks": code_blocks,
    "parse_program(humaneval-like)": lambda text: parse_program(text, HUMANEVAL_LIKE),
    "parse_program(mbpp-like)": lambda text: parse_program(text, MBPP_LIKE),
    "parse_tests": lambda text: parse_tests(text, "f"),
}

_FRAGMENTS = ["def f(x):", "    return x", "return", "```", "```python", "~~~", "\n", "    ", "\t", "(", ")", "[", "]",
              "{", "}", ":", "assert f(1) == 2", "if __name__ == '__main__':", "class A:", "@dec", "lambda: ", "'''",
              '"', "\\", "#", "<code>", "</code>", "[PYTHON]", "yield", "import os", "try:", "except:", "\x00", "é",
              "1e308", "0x", "f'{", "async def g():", "check(f)", "def check(candidate):", "    assert candidate(1)",
              "f = 1\nbreak", "from __future__ import annotations"]


def _size(rng: random.Random) -> int:
    """Mostly response-sized, sometimes far beyond any config's longest response."""
    r = rng.random()
    return rng.randint(1, 400) if r < 0.5 else rng.randint(400, 20_000) if r < 0.9 else rng.randint(20_000, MAX_LEN)


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // max(1, len(unit)) + 1))[:size]


def _many_fences(rng: random.Random, size: int) -> str:
    tags = ["python", "py", "", "text", "js", "python print(1)"]
    unit = f"{'`' * rng.randint(3, 6)}{rng.choice(tags)}\n{rng.choice(_FRAGMENTS)}\n{'`' * rng.randint(3, 6)}\nprose\n"
    return _repeat(unit, size)


def _unclosed_fences(rng: random.Random, size: int) -> str:
    return _repeat(rng.choice(["```", "```python\n", "~~~\n", "````\n```\n", "```python\ndef f(x):\n", "<code", "[PYTHON]"]), size)


def _char_run(rng: random.Random, size: int) -> str:
    return rng.choice("`~([{ \n\t:#\"'<\\x-@") * size


def _deep_nesting(rng: random.Random, size: int) -> str:
    depth = size // 2
    kind = rng.randrange(6)
    if kind == 0:
        opener = rng.choice("([{")
        return opener * depth + "1" + {"(": ")", "[": "]", "{": "}"}[opener] * depth
    if kind == 1:
        return rng.choice(["-", "not ", "~", "lambda: ", "a.", "a**"]) * (size // 4) + "1"
    if kind == 2:  # indentation
        lines = [" " * i + f"if x{i}:" for i in range(int((2 * size) ** 0.5))]  # ~size chars in all
        return "def f(x):\n" + "\n".join(lines) + "\n" + " " * len(lines) + " return 1"
    if kind == 3:
        return "f" + "()" * depth
    if kind == 4:
        return "```python\ndef f(x):\n    return " + "(" * min(depth, 10_000) + "x" + ")" * min(depth, 10_000) + "\n```"
    return "    return " + "[" * 150 + "1" + "]" * 150  # just under the parser's limit: parses, deeply


def _huge_literal(rng: random.Random, size: int) -> str:
    return rng.choice(["def f(x):\n    return " + "9" * size, "x = '" + "a" * size + "'", "    return 1e" + "9" * size,
                       "assert f(1) == " + "7" * size, "s = '''" + "\\n" * (size // 2)])


def _random_fragments(rng: random.Random, size: int) -> str:
    parts, total = [], 0
    while total < size:
        part = rng.choice(_FRAGMENTS)
        parts.append(part + rng.choice(["", "\n", " "]))
        total += len(parts[-1])
    return "".join(parts)[:size]


GENERATORS = [_many_fences, _unclosed_fences, _char_run, _deep_nesting, _huge_literal, _random_fragments]


def inputs(n: int, seed: int = 0) -> list[str]:
    """n adversarial texts, seeded, cycling through the generators."""
    rng = random.Random(seed)
    return [GENERATORS[i % len(GENERATORS)](rng, _size(rng)) for i in range(n)]


def fuzz(n: int, seed: int = 0) -> list[dict]:
    """Each parser on the same n inputs: {"parser", "inputs", "crashes", "max_seconds", "max_len"}
    (max_seconds: CPU seconds of the slowest input)."""
    return run_parsers(PARSERS, inputs(n, seed), clock=time.process_time)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = fuzz(args.n, args.seed)
    print_rows(rows)
    return 1 if any(row["crashes"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
