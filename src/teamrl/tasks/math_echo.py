"""Answers that hand the question back instead of answering it, and the form an answer must take.

math-verify compares values, so an answer that *restates* the question's expression has the gold's
value without any work done: `\\boxed{17+5-8}` for "17+5-8", `\\dfrac{3}{\\sqrt{27}}` for "Simplify
$\\frac{3}{\\sqrt{27}}$", `(16 - 3 - 4) * 2` for a GSM8K question about those numbers. Two rules close
it (docs/verifiers/math.md, "Echoes and the answer's form"); both are about the question, so they
live beside the workflows that know it:

1. **Echo, by meaning.** An answer that is not a plain number and whose expression is one of the
   question's own expressions is no answer, however it is spelled: `\\dfrac` or `\\frac`, `\\left(`,
   brackets of any kind around it, `+ 0`, `\\cdot 1`, `/1`, terms reordered
   (:func:`teamrl.tasks.math_canon.canonical`). The gold itself is exempt (a question may quote the
   form it wants), and so is any answer written as the gold is.
2. **Value or expression** (`answer_form`, a task setting): `value` asks for a number (`42`,
   `-3.5`, a fraction in lowest terms such as `\\frac{8}{21}` or `3/4`, with units, `$`, `%` or
   `x =` around it) wherever the gold is one, so `(16 - 3 - 4) * 2`, `7+7` and `36/2` are no answers; `expression` lets any single-valued expression
   equal to the gold count (MATH-500's `2\\sqrt{3}`, `\\frac{\\pi}{6}`), rule 1 still applying. `auto`
   takes `value` for the computing sources (arithmetic, GSM8K, AIME) and `expression` elsewhere.
"""

from __future__ import annotations

import functools
import math
import re

from teamrl.tasks.math_canon import Node, canonical, subtrees
from teamrl.tasks.math_shape import ascii_digits, join_digit_groups, without_unit_words

__all__ = ["ANSWER_FORMS", "ascii_digits", "echo_refusal", "is_value", "resolve_answer_form"]

ANSWER_FORMS = ("auto", "value", "expression")
"""The `answer_form` settings: see the module docstring."""
_VALUE_SOURCES = ("arithmetic", "gsm8k", "aime")  # their golds are numbers computed from the question

_SPACING_RE = re.compile(r"\\[,;:! ]|\\left|\\right|[\s$]")
_PLAIN_NUMBER_RE = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")  # 1,234 is a plain number
# What may surround a value: a currency sign, percent, degrees, a unit or word in \text{}, spacing.
_VALUE_WRAPPING_RE = re.compile(
    r"\\\$|\\?%|\^\s*\{?\s*\\circ\s*\}?|°|\\(?:text|textrm|mathrm|mbox)\s*\{[A-Za-z .]*\}|\\[,;:! ]|[\s$~]"
)
_NAME_PREFIX_RE = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?=")  # "x = 5", "a_1 = 5"
_NUMBER_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")  # 42, -3.5, .5
_FRACTION_RE = re.compile(  # 3/4, \frac{8}{21}, \frac65, \frac{-1}{2}
    r"[+-]?(?:(\d+)/(\d+)|\\[dt]?frac(?:\{[+-]?(\d+)\}|(\d))(?:\{(\d+)\}|(\d)))"
)
_MATH_SEGMENT_RE = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
# Arithmetic written in plain text ("17+5-8", "What is (16 - 3) * 2?"): digits joined by operators.
# One character class, so that finding the runs is one linear pass whatever the text.
_PLAIN_RUN_RE = re.compile(r"[\d\s.()+\-*/^×÷]+")
_OPERATION_RE = re.compile(r"[\d)]\s*[-+*/^×÷]\s*[\d(]")
_DECIMAL_ASKED_RE = re.compile(r"\bdecimal\b", re.IGNORECASE)
_FRACTION_ASKED_RE = re.compile(r"\b(?:common|improper) fraction\b", re.IGNORECASE)
_DECIMAL_RE = re.compile(r"-?\d*\.\d+")
_FRACTION_MARK_RE = re.compile(r"\\[dt]?frac|/")
MAX_QUESTION_CHARS = 20_000
"""Longest question searched for expressions by meaning (the verbatim rule reads any length)."""


def _squash(text: str) -> str:
    return _SPACING_RE.sub("", text).rstrip(".").lower()


def resolve_answer_form(answer_form: str, source: str = "", truth: str | None = None) -> str:
    """`value` or `expression`: `answer_form` itself, or for `auto` the form the task asks for: a value
    for the computing sources (`source`) and wherever the gold `truth` is itself a value.

    >>> resolve_answer_form("auto", "gsm8k-test"), resolve_answer_form("auto", "math500"), resolve_answer_form("value", "math500")
    ('value', 'expression', 'value')
    >>> resolve_answer_form("auto", "math500", "4495"), resolve_answer_form("auto", "math500", "11\\sqrt{2}")
    ('value', 'expression')
    """
    if answer_form not in ANSWER_FORMS:
        raise ValueError(f"answer_form must be one of {', '.join(ANSWER_FORMS)}, got {answer_form!r}")
    if answer_form != "auto":
        return answer_form
    if source.lower().startswith(_VALUE_SOURCES) or (truth is not None and is_value(truth)):
        return "value"
    return "expression"


def is_value(answer: str) -> bool:
    """Whether `answer` states a number rather than an expression to evaluate.

    Units, `\\$`, `%`, degrees, thousands separators and a name (`x = `) around the number are allowed.

    >>> [is_value(a) for a in ("42", "$42.50", "42 cm^2", r"\\frac{8}{21}", "x = -3", r"42\\,\\text{cm}", "1,234")]
    [True, True, True, True, True, True, True]
    >>> [is_value(a) for a in ("(16 - 3 - 4) * 2", "7+7", r"2\\sqrt{3}", r"\\frac{28}{6}", "36/2", "x")]
    [False, False, False, False, False, False]
    """
    text = join_digit_groups(ascii_digits(without_unit_words(answer.strip().rstrip("."))))
    text = _NAME_PREFIX_RE.sub("", _VALUE_WRAPPING_RE.sub("", text))
    if _NUMBER_RE.fullmatch(text):
        return True
    fraction = _FRACTION_RE.fullmatch(text)
    if fraction is None:
        return False
    numerator, denominator = (int(g) for g in fraction.groups() if g is not None)
    # 36/2 and \frac{6}{4} are a division still to do; a fraction in lowest terms is a number.
    return denominator > 1 and math.gcd(numerator, denominator) == 1


def _question_parts(question: str) -> list[str]:
    """The question's formulas: its `$...$` / `\\(...\\)` / `\\[...\\]` segments and plain-text arithmetic."""
    question = question.replace("\\$", " ")  # an escaped dollar is money, not math
    parts = [next(g for g in m.groups() if g is not None) for m in _MATH_SEGMENT_RE.finditer(question)]
    prose = _MATH_SEGMENT_RE.sub(" ", question)
    runs = (m.group(0).strip(" .") for m in _PLAIN_RUN_RE.finditer(prose))
    return parts + [run for run in runs if _OPERATION_RE.search(run)]


@functools.lru_cache(maxsize=2048)
def _question_forms(question: str) -> frozenset[Node]:
    """Every expression the question writes, and every expression inside one, by meaning.

    Cached: the K candidates of a group and both agents of a team ask about the same question.
    """
    if len(question) > MAX_QUESTION_CHARS:
        return frozenset()
    forms: set[Node] = set()
    for part in _question_parts(question):
        tree = canonical(part.strip().rstrip(".,;:?"))
        if tree is not None:
            forms.update(node for node in subtrees(tree) if node[0] not in ("n", "v"))
    return frozenset(forms)


def _meaning(answer: str) -> Node | None:
    """The answer's expression by meaning, a name (`x = ...`) and trailing unit words left out."""
    tree = canonical(without_unit_words(answer))
    if tree is not None and tree[0] == "=" and tree[1][0] == "v":  # type: ignore[index]
        return tree[2]  # type: ignore[return-value]
    return tree


def echo_refusal(answer: str, question: str, truth: str, source: str = "", answer_form: str = "auto") -> str | None:
    """Why `answer` restates the question, or is an expression where a value is asked for (None: neither).

    >>> echo_refusal("17+5-8", "17+5-8", "14", "arithmetic-L2")
    'restates the question'
    >>> echo_refusal("7 + 7", "17+5-8", "14", "arithmetic-L2")
    'an expression where the task asks for a value'
    >>> echo_refusal(r"\\left(\\dfrac{3}{\\sqrt{27}}\\right) \\cdot 1", r"Simplify $\\frac{3}{\\sqrt{27}}$.", r"\\frac{\\sqrt{3}}{3}")
    'restates the question'
    >>> echo_refusal("14", "17+5-8", "14", "arithmetic-L2") is None, echo_refusal("\\\\frac{14}{3}", "Simplify 28/6", "\\\\frac{14}{3}") is None
    (True, True)
    """
    squashed = _squash(answer)
    if not squashed or _PLAIN_NUMBER_RE.fullmatch(squashed):
        return None
    if squashed != _squash(truth) and squashed in _squash(question):
        return "restates the question"
    meaning = _meaning(answer)
    if (
        meaning is not None
        and meaning[0] != "n"
        and meaning != _meaning(truth)
        and meaning in _question_forms(question)
    ):
        return "restates the question"
    if resolve_answer_form(answer_form, source, truth) == "value" and is_value(truth) and not is_value(answer):
        return "an expression where the task asks for a value"
    return _form_refusal(answer, meaning, question, truth)


def _operations(node: Node | None) -> set[str]:
    """The operations still to do in an expression: functions and commands applied (floor, log, binom,
    factorial, |.|), roots (a power with a fractional exponent) and inverses of a named function (f^{-1})."""
    found: set[str] = set()
    for part in subtrees(node) if node is not None else ():
        if part[0] == "f" and part[1] not in ("_", "'", "\\%"):
            found.add(str(part[1]))
        elif part[0] == "^" and part[2][0] == "n":  # type: ignore[index]
            exponent = part[2][1]  # type: ignore[index]
            if exponent.denominator != 1:  # type: ignore[union-attr]
                found.add("a root")
            elif exponent < 0 and part[1][0] == "v" and len(str(part[1][1])) == 1:  # type: ignore[index,operator]
                found.add("an inverse function")
    return found


def _form_refusal(answer: str, meaning: Node | None, question: str, truth: str) -> str | None:
    """Why an answer equal in value is not in the final form the question asks for, else None.

    The form is read from the question and the gold, never from the answer's value: a decimal asked for
    ("as a decimal") is no fraction and a common fraction asked for is no decimal; and an operation the
    question asks to carry out (a floor, a root, a binomial, a logarithm, an inverse function...) that
    the gold no longer holds must not be left in the answer.
    """
    squashed = _squash(answer)
    if (
        _DECIMAL_ASKED_RE.search(question)
        and _DECIMAL_RE.fullmatch(_squash(truth))
        and _FRACTION_MARK_RE.search(squashed)
    ):
        return "a fraction where the question asks for a decimal"
    if (
        _FRACTION_ASKED_RE.search(question)
        and _FRACTION_MARK_RE.search(_squash(truth))
        and _DECIMAL_RE.search(squashed)
    ):
        return "a decimal where the question asks for a fraction"
    if len(question) > MAX_QUESTION_CHARS:
        return None
    asked: set[str] = set()
    for form in _question_forms(question):
        asked |= _operations(form)
    left = sorted((_operations(meaning) & asked) - _operations(_meaning(truth)))
    return f"still holds the question's {left[0]}" if left else None
