"""Fuzz teamrl's math parsers of model output: no crash, and time bounded on adversarial input.

Inputs: long runs of one character (spaces, newlines, digits, braces, backslashes, ``$``),
deep brace and box nesting, huge numbers (far over Python's 4,300-digit int-str limit),
many answer markers or boxes, and random mixes of answer fragments, up to ``MAX_LEN``
characters (the longest configured response, ``rollout.max_new_tokens`` at most 48 tokens
in the shipped configs, is a few hundred characters at ~8 characters per token; 200k is far
beyond). Each parser gets every input; a crash is any exception.

    python -m scripts.checks.fuzz_math --n 500           # table; exit 1 on a crash
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from typing import Any


from scripts.checks.fuzzing import print_rows, run_parsers
from teamrl.tasks.math_answers import answers_match
from teamrl.tasks.math_shape import answer_refusal
from teamrl.tasks.math_parsing import extract_boxed, extract_final_answer, locate_final_answer
from teamrl.workflows.math_team import program_answer, reasoner_answer

MAX_LEN = 200_000
_RUN_CHARS = (" ", "\n", "\t", "9", "0", "{", "}", "\\", "$", "=", ",", "-", "*", "#", ".", "^")
_FRAGMENTS = (
    "\\boxed{", "\\boxed", "\\fbox{", "}", "{", "\\frac{", "}{", "\\sqrt{", "\\left(", "\\right)", "$", "$$",
    "\\(", "\\)", "\\[", "\\]", "\\$", "The answer is ", "Final Answer: ", "the final answer is", "Answer:",
    "answer", "####", "**", "\n", " ", "  \t ", "=", " = ", "is ", ", ", "; ", "or ", "not ", "maybe ", "wait",
    "between ", " and ", "from ", " to ", "18", "-3", "1,000", "10,\\!080", "0.5", "1/2", "\\pi", "x", "y^2",
    "\\text{Evelyn}", "\\pm", "\\infty", "(3,4]", "\\{1,2\\}", "I hope it is correct.", "<think>", "</think>",
    "9^{9^{9^{9}}}", "100000!", "\\\\", "&", "\\begin{pmatrix}", "\\end{pmatrix}", "%", "\\%", "?", ".",
)


def _length(rng: random.Random) -> int:
    return rng.choice((rng.randint(1, 100), rng.randint(100, 5_000), rng.randint(5_000, 50_000), MAX_LEN))


def _input(rng: random.Random) -> str:
    kind = rng.randrange(6)
    n = _length(rng)
    if kind == 0:  # a long run of one character, maybe between answer fragments
        run = rng.choice(_RUN_CHARS) * n
        return rng.choice(("", "The answer is ", "\\boxed{", "answer", "the")) + run + rng.choice(("", "x", "18", "}"))
    if kind == 1:  # deep nesting
        depth = n // 8
        opener = rng.choice(("\\boxed{", "{", "\\frac{", "\\left("))
        return opener * depth + "1" + rng.choice(("}", "\\right)", "")) * rng.choice((depth, depth // 2))
    if kind == 2:  # a huge number
        digits = "".join(rng.choice("0123456789") for _ in range(min(n, 20_000)))
        return rng.choice(("\\boxed{%s}", "The answer is %s.", "%s", "#### %s", "x = %s")) % digits
    if kind == 3:  # many markers or boxes
        unit = rng.choice(("Answer: 1\n", "\\boxed{1}", "\\boxed{", "####", "The answer is ", "$", "\\boxed 5 "))
        return unit * max(1, n // len(unit))
    parts: list[str] = []
    size = 0
    while size < n:  # a random mix of fragments
        part = rng.choice(_FRAGMENTS)
        parts.append(part)
        size += len(part)
    return "".join(parts)


PARSERS: dict[str, Callable[[str], Any]] = {
    "extract_boxed": extract_boxed,
    "locate_final_answer": locate_final_answer,
    "extract_final_answer": extract_final_answer,
    "answer_refusal": lambda text: answer_refusal(text, "18"),
    "reasoner_answer": reasoner_answer,
    "program_answer": program_answer,
    "answers_match": lambda text: answers_match(text, "18", timeout_seconds=2),
}


def fuzz(n: int, seed: int = 0) -> list[dict]:
    """Run every parser on ``n`` adversarial inputs; one row per parser with its crashes and worst time."""
    rng = random.Random(seed)
    return run_parsers(PARSERS, [_input(rng)[:MAX_LEN] for _ in range(n)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500, help="inputs per parser")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = fuzz(args.n, args.seed)
    print_rows(rows)
    return 1 if any(row["crashes"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
