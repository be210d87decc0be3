"""Answers that hand the question back instead of answering it (a reward hack the probe found).

math-verify compares values, so an answer that *restates* the question's expression has the gold's
value without any work done: on the arithmetic source the question is `17+5-8` and the answer
`\\boxed{17+5-8}` was graded correct (`teamrl probe --task math`, kind "prompt echoed"). Two rules
close it, both about the question, so they live beside the workflow that knows it:

1. an answer that is not a plain number and appears verbatim (spacing and `$` ignored) in the
   question is no answer, unless it is the gold itself (a question may quote the form it wants);
2. on the arithmetic source, whose question *is* an expression to evaluate, the answer must be a
   plain number: `7+7` or `(17+5)-8` is the question rearranged, not its value.

Elsewhere single-valued expressions equal to the gold stay correct (docs/verifiers/math.md, known
limits): on MATH-500 `\\frac{14}{3}` and `2\\sqrt{3}` are answers.
"""

from __future__ import annotations

import re
import unicodedata

_SPACING_RE = re.compile(r"\\[,;:! ]|\\left|\\right|[\s$]")
_PLAIN_NUMBER_RE = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")  # 1,234 is a plain number


def _squash(text: str) -> str:
    return _SPACING_RE.sub("", text).rstrip(".").lower()


def echo_refusal(answer: str, question: str, truth: str, source: str = "") -> str | None:
    """Why `answer` restates the question rather than answering it (None: it does not).

    >>> echo_refusal("17+5-8", "17+5-8", "14", "arithmetic-L2")
    'restates the question'
    >>> echo_refusal("7 + 7", "17+5-8", "14", "arithmetic-L2")
    'arithmetic answered with arithmetic'
    >>> echo_refusal("14", "17+5-8", "14", "arithmetic-L2") is None, echo_refusal("\\\\frac{14}{3}", "Simplify 28/6", "\\\\frac{14}{3}") is None
    (True, True)
    """
    squashed = _squash(answer)
    if not squashed or _PLAIN_NUMBER_RE.fullmatch(squashed):
        return None
    if squashed != _squash(truth) and squashed in _squash(question):
        return "restates the question"
    if source.startswith("arithmetic"):
        return "arithmetic answered with arithmetic"
    return None


def ascii_digits(text: str) -> str:
    """`text` with every Unicode decimal digit written as its ASCII digit, so that shape checks that
    count values see `19 (１８)` as the two values it is (the probe's "unicode digits" hack).

    >>> ascii_digits("19 (１８)"), ascii_digits("٤٢"), ascii_digits("x²")
    ('19 (18)', '42', 'x²')
    """
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() and not ch.isascii() else ch for ch in text)
