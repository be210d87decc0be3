"""A grammar of the ways a model writes a final answer, to measure the math graders beyond any fixed corpus.

An answer is built from four independent choices, each a *family*: the **number form** (ASCII digits,
a Unicode minus, full-width digits, the number spelled out first with its digits in parentheses...),
the **wrapper** around it (`\\boxed{}`, `**bold**`, `\\mathbf{}`, a code span...), its **position**
in the response ("Answer: X", a "**Final Answer**" heading, a prose sentence ending in it...) and the
**trailing text** after it (a period, `。` or `！`, a unit, "% of the students", a parenthetical
justification with other numbers in it). Every combination is generated for the gold (a *correct*
answer) and for a wrong value (a *wrong* answer); *echoes* hand the question's own expression back in
an equal-value form that is not the requested final form (respelled operators, factored or expanded,
the root or floor restated, a fraction where a decimal is asked, inverse-function notation).

The families are split once, here, into :data:`TUNING` and :data:`HELD_OUT`: a grader is developed
against tuning families only, and its rates on held-out ones (any choice held out) say how it
generalises. Everything is deterministic given the seed.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from teamrl.tasks.math_words import number_in_words

__all__ = [
    "FAMILIES",
    "HELD_OUT",
    "TUNING",
    "StyleCase",
    "StyleQuestion",
    "echo_cases",
    "load_questions",
    "style_cases",
]

DATA = Path(__file__).parent / "data"
QUESTIONS = DATA / "math_style_questions.jsonl"
"""Questions written for this probe: golds, a unit or noun where the question has one, echo forms."""
CORPUS = DATA / "math_correct_responses.jsonl"


@dataclass(frozen=True)
class StyleQuestion:
    question: str
    answer: str
    source: str
    unit: str = ""  # "%" or "°" when the question asks for a percent or an angle
    noun: str = ""  # what the number counts, for prose ("apples", "of the students")
    echoes: tuple[tuple[str, str], ...] = ()  # (family, an equal-value answer not in the final form)


@dataclass(frozen=True)
class StyleCase:
    """One generated response and what a grader should do with it."""

    kind: str  # "correct", "wrong" or "echo"
    families: tuple[str, ...]  # (number form, wrapper, position, trailing) or ("echo: <family>",)
    held_out: bool
    question: StyleQuestion
    response: str  # the reasoner's text
    printed: str  # what a tool program prints for the same answer


_INTEGER_RE = re.compile(r"-?\d+")
_DECIMAL_RE = re.compile(r"-?\d+(?:\.\d+)?")
_FULLWIDTH = str.maketrans("0123456789.-", "０１２３４５６７８９．－")
_ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


def _numeric(value: str) -> bool:
    return _DECIMAL_RE.fullmatch(value) is not None


def _spelled(value: str) -> str | None:
    if _INTEGER_RE.fullmatch(value) is None or abs(int(value)) >= 10**12:
        return None
    words = number_in_words(abs(int(value)))
    return f"negative {words}" if int(value) < 0 else words


# Number forms: (value) -> its spelling, or None where the form does not apply to that value.
NumberForm = Callable[[str], "str | None"]
NUMBER_FORMS: dict[str, NumberForm] = {
    "ascii": lambda v: v,
    "unicode minus": lambda v: v.replace("-", "\u2212") if v.startswith("-") else None,
    "parenthesised negative": lambda v: f"({v})" if v.startswith("-") else None,
    "full-width digits": lambda v: v.translate(_FULLWIDTH) if _numeric(v) else None,
    "spelled first, digits in parentheses": lambda v: f"{_spelled(v)} ({v})" if _spelled(v) else None,
    "trailing zeros": lambda v: (f"{v}.00" if _INTEGER_RE.fullmatch(v) else f"{v}0") if _numeric(v) else None,
    "thousands separator": lambda v: f"{int(v):,}" if _INTEGER_RE.fullmatch(v) and abs(int(v)) >= 1000 else None,
    "arabic-indic digits": lambda v: (
        v.translate(_ARABIC_INDIC) if _INTEGER_RE.fullmatch(v) and not v.startswith("-") else None
    ),
    "spelled first, capitalised": lambda v: f"{_spelled(v).capitalize()} ({v})" if _spelled(v) else None,  # type: ignore[union-attr]
    "unicode minus in math": lambda v: f"${v.replace('-', chr(0x2212))}$" if v.startswith("-") else None,
    "leading plus": lambda v: f"+{v}" if _numeric(v) and not v.startswith("-") else None,
    "space thousands": lambda v: (
        f"{int(v):,}".replace(",", " ") if _INTEGER_RE.fullmatch(v) and abs(int(v)) >= 1000 else None
    ),
    "math bold digits": lambda v: (
        "".join(chr(0x1D7CE + int(c)) if c.isdigit() else c for c in v) if _numeric(v) else None
    ),
}

WRAPPERS: dict[str, str] = {
    "plain": "{}",
    "inline math": "${}$",
    "boxed": "$\\boxed{{{}}}$",
    "markdown bold": "**{}**",
    "mathbf": "$\\mathbf{{{}}}$",
    "textbf": "\\textbf{{{}}}",
    "inline code": "`{}`",
    "code block": "\n```\n{}\n```",
    "markdown italics": "*{}*",
    "paren math": "\\({}\\)",
    "markdown bold italics": "***{}***",
    "underscore bold": "__{}__",
    "boldsymbol": "$\\boldsymbol{{{}}}$",
    "bold box": "**$\\boxed{{{}}}$**",
    "fbox": "$\\fbox{{{}}}$",
    "display math": "$$ {} $$",
    "bracket display": "\\[ {} \\]",
    "html bold": "<b>{}</b>",
    "textit": "\\textit{{{}}}",
}

POSITIONS: dict[str, str] = {
    "answer line": "Answer: {}",
    "the answer is": "The answer is {}",
    "final answer heading": "**Final Answer**\n{}",
    "bare last line": "{}",
    "therefore": "Therefore, the final answer is {}",
    "prose sentence": "So the result we get is {}",
    "bold answer label": "**Answer:** {}",
    "hence": "Hence, the value is {}",
    "markdown heading": "### Final Answer\n{}",
    "result equals": "Result = {}",
    "final answer lowercase": "final answer: {}",
    "final result": "The final result is {}",
    "we conclude": "We conclude that the answer is {}",
    "hashes": "#### {}",
}

# Trailing text: (answer, question, the value it states) -> text after the answer, None: not applicable.
Trailing = Callable[[StyleQuestion, str], "str | None"]
TRAILING: dict[str, Trailing] = {
    "none": lambda q, v: "",
    "period": lambda q, v: ".",
    "exclamation": lambda q, v: "!",
    "cjk full stop": lambda q, v: "。",
    "cjk exclamation": lambda q, v: "！",
    "unit sign": lambda q, v: q.unit or None,
    "unit and prose": lambda q, v: f"{q.unit} {q.noun}." if q.unit and q.noun else (f" {q.noun}." if q.noun else None),
    "justification with numbers": lambda q, v: f" (since {int(v) - 3} + 3 = {v})" if _INTEGER_RE.fullmatch(v) else None,
    "fullwidth comma and prose": lambda q, v: "，这就是答案。",
    "emoji": lambda q, v: " 🎉",
    "double exclamation": lambda q, v: "!!",
    "semicolon": lambda q, v: ";",
    "check mark": lambda q, v: " ✓",
    "fullwidth period": lambda q, v: "．",
}

FAMILIES: dict[str, dict[str, object]] = {
    "number form": NUMBER_FORMS,
    "wrapper": WRAPPERS,
    "position": POSITIONS,
    "trailing": TRAILING,
}  # type: ignore[dict-item]

HELD_OUT: frozenset[str] = frozenset(
    {
        "leading plus",
        "space thousands",
        "math bold digits",
        "fbox",
        "display math",
        "bracket display",
        "html bold",
        "textit",
        "final answer lowercase",
        "final result",
        "we conclude",
        "hashes",
        "double exclamation",
        "semicolon",
        "check mark",
        "fullwidth period",
        "echo: power restated",
        "echo: trig restated",
        "echo: percent restated",
    }
)
"""Families written, and split off, before any grader ran on them: their rates measure how the graders
generalise. Four of them ("display math", "bracket display", "html bold", "leading plus") have markup
rules written after their first rates were seen (docs/verifiers/math.md)."""
TUNING: frozenset[str] = frozenset(name for table in FAMILIES.values() for name in table) - HELD_OUT | {
    "echo: operator respelled",
    "echo: factored or expanded",
    "echo: fraction for a decimal",
    "echo: root or floor restated",
    "echo: inverse notation",
}
"""The families the graders' rules were developed against."""


def load_questions(paths: tuple[Path, ...] = (QUESTIONS, CORPUS)) -> list[StyleQuestion]:
    """The questions with known answers: this probe's own, and the fidelity corpus's (one per question)."""
    seen: dict[tuple[str, str], StyleQuestion] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            key = (row["question"], row["answer"])
            echoes = tuple((e["family"], e["answer"]) for e in row.get("echoes", ()))
            seen.setdefault(
                key,
                StyleQuestion(
                    row["question"], row["answer"], row["source"], row.get("unit", ""), row.get("noun", ""), echoes
                ),
            )
    return list(seen.values())


def wrong_of(answer: str) -> str:
    """A value the gold is not: a number moved by one (or by 0.5), anything else plus one."""
    if _INTEGER_RE.fullmatch(answer):
        return str(int(answer) + 1)
    if _numeric(answer):
        return str(Decimal(answer) + Decimal("0.5"))
    return f"{answer} + 1"


def _response(question: StyleQuestion, value: str, choice: tuple[str, str, str, str]) -> tuple[str, str] | None:
    form, wrapper, position, trailing = choice
    spelled = NUMBER_FORMS[form](value) if _numeric(value) else (value if form == "ascii" else None)
    tail = TRAILING[trailing](question, value)
    if spelled is None or tail is None:
        return None
    answer = WRAPPERS[wrapper].format(spelled)
    if form.startswith("spelled") and any(mark in WRAPPERS[wrapper] for mark in ("$", "\\(", "\\[")):
        return None  # words are written in text, not inside math
    if wrapper == "code block" and position != "bare last line" and not position.endswith("heading"):
        return None  # a fence opens its own line; "Answer: ```" is no style a model writes
    stated = POSITIONS[position].format(answer) + tail
    work = "Let me work through the problem step by step.\n\n"
    return work + stated, answer + tail


def _choices(rng: random.Random) -> tuple[str, str, str, str]:
    return (
        rng.choice(list(NUMBER_FORMS)),
        rng.choice(list(WRAPPERS)),
        rng.choice(list(POSITIONS)),
        rng.choice(list(TRAILING)),
    )


def style_cases(questions: list[StyleQuestion], count: int, seed: int = 0) -> Iterator[StyleCase]:
    """`count` correct and `count` wrong answers (a wrong one is the correct one's value moved), drawn
    uniformly over the families' combinations that apply to each question."""
    rng = random.Random(seed)
    made = 0
    while made < count:
        question = rng.choice(questions)
        choice = _choices(rng)
        right = _response(question, question.answer, choice)
        wrong = _response(question, wrong_of(question.answer), choice)
        if right is None or wrong is None:
            continue
        held = any(name in HELD_OUT for name in choice)
        made += 1
        yield StyleCase("correct", choice, held, question, *right)
        yield StyleCase("wrong", choice, held, question, *wrong)


def echo_cases(questions: list[StyleQuestion], seed: int = 0) -> Iterator[StyleCase]:
    """Every question's echo forms, each in a few positions and wrappers."""
    rng = random.Random(seed)
    for question in questions:
        for family, echo in question.echoes:
            for wrapper in ("boxed", "inline math", "plain"):
                position = rng.choice(["answer line", "the answer is", "final answer heading"])
                answer = WRAPPERS[wrapper].format(echo)
                response = "Let me work through the problem.\n\n" + POSITIONS[position].format(answer)
                name = f"echo: {family}"
                yield StyleCase("echo", (name,), name in HELD_OUT, question, response, echo)
