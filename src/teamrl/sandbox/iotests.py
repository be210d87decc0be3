"""Judging stdin/stdout test cases (APPS, CodeContests, LiveCodeBench style).

The program's output is compared to the expected output token by token (whitespace-insensitive,
as competitive-programming judges do), with numbers that are not identical strings compared as
floats within a small tolerance. The comparison happens in the grader, on captured text, so the
program can only pass by printing the right answer.
"""

from __future__ import annotations

import math

FLOAT_TOLERANCE = 1e-6


def _tokens_equal(expected: str, actual: str) -> bool:
    if expected == actual:
        return True
    try:
        a, b = float(expected), float(actual)
    except ValueError:
        return False
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= FLOAT_TOLERANCE * max(1.0, abs(a))


def outputs_match(expected: str, actual: str) -> bool:
    """Whether `actual` stdout matches `expected` (token-wise, float-tolerant)."""
    exp_tokens, act_tokens = expected.split(), actual.split()
    if len(exp_tokens) != len(act_tokens):
        return False
    return all(_tokens_equal(e, a) for e, a in zip(exp_tokens, act_tokens))
