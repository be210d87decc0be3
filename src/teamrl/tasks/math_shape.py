"""What a math answer may look like: the shape rules of the math verifier contract.

``docs/verifiers/math.md`` states the contract; this module enforces the part that looks at
the answer itself, once :func:`teamrl.tasks.math_parsing.extract_final_answer` has found it. An
answer that hedges ("17 or 18", "not 18", "between 17 and 19", "18?"), lists candidates
("17, 18" when one value is expected), chains equations ("17 = 18") or runs numbers
together ("9 9", which SymPy reads as 9 + 9) is refused before any symbolic comparison,
because ``math-verify`` would otherwise pick one part of it and compare that.

The ground truth decides which shapes are expected: a list gold ("1,-2") allows lists, a
gold with ``\\pm`` allows ``\\pm``, a text gold's own words are allowed, and so on.

Every function here is linear in its input and never raises on ``str`` input.
"""

from __future__ import annotations

import re
import unicodedata

from teamrl.tasks.math_words import NUMBER_WORDS

__all__ = [
    "MAX_ANSWER_CHARS",
    "answer_refusal",
    "ascii_digits",
    "hedge_refusal",
    "join_digit_groups",
    "revision_refusal",
    "strip_unit_words",
    "without_unit_words",
    "words",
]

MAX_ANSWER_CHARS = 300
"""Longest answer read (whitespace collapsed); gold answers of GSM8K, MATH-500 and AIME are under 60."""

MAX_DIGITS = 40
"""Longest digit run in an answer, unless the gold has one as long (SymPy's int-str limit is 4,300)."""

# Words that make an answer a guess, a negation, a range or a set of candidates.
HEDGE_WORDS = frozenset(
    "or either neither nor maybe perhaps possibly probably likely unlikely may might could guess think "
    "unsure unknown approximately approx about around roughly nearly almost circa "
    "not no isn't aren't wasn't isnt cannot can't never except unless otherwise "
    "between from to through till until range ranging and "
    "wait actually hmm oops sorry mistake wrong incorrect instead alternatively correction".split()
)
# Words after a stated answer that revise it ("\\boxed{17}\nWait, actually it is 18").
REVISION_WORDS = frozenset(
    "wait actually hmm oops sorry mistake wrong incorrect instead alternatively correction "
    "recheck reconsider recalculate redo or maybe perhaps possibly probably not no isn't".split()
)
# Words before an answer on its own line that turn it into one of several options.
LEAD_HEDGE_WORDS = frozenset("or either maybe perhaps possibly probably may might guess unsure".split())

LATEX_COMMAND_RE = re.compile(r"\\[A-Za-z]+")
"""A LaTeX command name such as ``\\frac`` (its arguments not included)."""
_WORD_RE = re.compile(r"[a-z]+(?:'[a-z]+)?")
# Relations and set operations: an answer using one states a condition or several values.
_SYMBOL_RE = re.compile(
    r"\\(?:lor|vee|lnot|neg|not|neq|ne|approx|sim|simeq|pm|mp|lt|gt|le|leq|leqslant|ge|geq|geqslant|"
    r"in|notin|ni|cup|cap|setminus|subset|subseteq|supset|supseteq|to|rightarrow|Rightarrow|implies|iff|"
    r"mapsto|ldots|cdots|dots|vdots|mid|vert|lvert|rvert|Vert)(?![A-Za-z])|\.\.\.|[?<>|≤≥≠≈±∓…∈∉∪∩→⇒∨∧¬]"
)
_DIGITS_RE = re.compile(r"\d+")
# Thousands groups: 1,000 / 1\,000 / 1{,}000 / 10,\!080 / 1 000 (a 1-3 digit head, then 3-digit groups).
_DIGIT_GROUPS_RE = re.compile(r"(?<![\d.])\d{1,3}(?:(?:,\\!|\{,\}|\\[,! ]|[ ,~])\d{3})+(?![\d])")
_GROUP_SEP_RE = re.compile(r",\\!|\{,\}|\\[,! ]|[ ,~]")
# Two numbers with nothing but spacing between them ("9 9", "1\,8"): SymPy adds them.
_SPACED_NUMBERS_RE = re.compile(r"\d(?:\s|\\[,;:! ]|~|\\q?quad\b)+\.?\d")
# A number, a space, then a parenthesis holding another ("19 (18)"): a second candidate, not a product.
_ASIDE_NUMBER_RE = re.compile(r"\d\s+\([^()]*\d[^()]*\)")
# Constructs that print nothing, or only space: "9 \\text{ } 9" and "9\\phantom{0}9" are "9 9" too.
_INVISIBLE_RE = re.compile(
    r"\\(?:text|textrm|mathrm|mbox|hbox)\s*\{\s*\}|\{\s*\}|\\(?:h|v)?phantom\s*\{[^{}]*\}|\\hspace\*?\s*\{[^{}]*\}"
    r"|\\(?:enspace|thinspace|medspace|thickspace|negthinspace|negmedspace|space)(?![A-Za-z])"
)
_PROSE_RE = re.compile(r"[a-z]{2,}")
_TOWER_RE = re.compile(r"\^\s*\{[^{}]*\^|\^\s*\d+\s*\^")
_BIG_EXPONENT_RE = re.compile(r"\^\s*\{?\s*-?\d{4,}")
_BIG_FACTORIAL_RE = re.compile(r"\d{4,}\s*!")
LETTER_RE = re.compile(r"[A-Za-z]")
_OPERATOR_RE = re.compile(r"[-+*/]")


_FULLWIDTH_SIGNS = str.maketrans("．，－＋", ".,-+")


def ascii_digits(text: str) -> str:
    """`text` with every Unicode decimal digit written as its ASCII digit (and a full-width `．，－＋` as
    ASCII), so that shape checks that count values see `19 (１８)` as the two values it is (the probe's
    "unicode digits" hack) and math-verify reads `１３．５` as 13.5.

    >>> ascii_digits("19 (１８)"), ascii_digits("٤٢"), ascii_digits("x²")
    ('19 (18)', '42', 'x²')
    """
    text = text.translate(_FULLWIDTH_SIGNS)
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() and not ch.isascii() else ch for ch in text)


def join_digit_groups(text: str) -> str:
    """``1,000`` / ``1\\,000`` / ``10,\\!080`` / ``1 000`` -> ``1000``: one number, not a list or a sum."""
    return _DIGIT_GROUPS_RE.sub(lambda m: _GROUP_SEP_RE.sub("", m.group(0)), text)


# Trailing unit words after a number or a closing brace: "18 dollars", "5.4 cents", "\\frac{14}{3} cups", "42 cm²".
_UNIT_WORDS_RE = re.compile(
    r"(?<=[\d}])\s*(?<![\\A-Za-z])(?:[A-Za-z]{2,}(?:[ .'/-]+[A-Za-z]+)*\.?|[mgsLh](?![A-Za-z]))"
    r"(?:\s*\^\s*\{?[23]\}?|[²³])?$"
)  # one letter only for the metric units m, g, s, L, h: "42 x" is no unit
# A trailing unit in LaTeX: "42\,\text{cm}", "42 \text{ cm}^2", "42\ \mathrm{cm^2}" (letters only inside).
_LATEX_UNIT_RE = re.compile(
    r"(?<=[\d}])(?:\s|\\[,;:! ])*\\(?:text|textrm|mathrm|mbox|operatorname)\s*\{\s*[A-Za-z][A-Za-z .'/-]*"
    r"(?:\^\s*\{?[23]\}?)?\s*\}(?:\s*\^\s*\{?[23]\}?|[²³])?\s*$"
)


def strip_unit_words(answer: str, gold: str) -> str:
    """``18 dollars`` -> ``18`` when the gold has no words or letters of its own (a number).

    math-verify drops some units itself (``apples``) but reads others as variables
    (``dollars`` becomes ``d*o*l*...``).

    >>> strip_unit_words("18 dollars", "18"), strip_unit_words("18 dollars", r"\\text{18 dollars}")
    ('18', '18 dollars')
    """
    if LETTER_RE.search(LATEX_COMMAND_RE.sub(" ", gold)):
        return answer
    return without_unit_words(answer)


def without_unit_words(answer: str) -> str:
    """``answer`` without a trailing unit after its number (``18 dollars``, ``18\\,\\text{cm}`` -> ``18``).

    >>> without_unit_words("42 cm^2"), without_unit_words(r"42 \\text{ cm}^2"), without_unit_words("42 cm²")
    ('42', '42', '42')
    """
    stripped = _LATEX_UNIT_RE.sub("", answer.rstrip()).rstrip()
    return _UNIT_WORDS_RE.sub("", stripped) or answer


def words(text: str) -> set[str]:
    """Prose words of an answer, LaTeX command names left out (``\\text{or}`` gives ``or``)."""
    return set(_WORD_RE.findall(LATEX_COMMAND_RE.sub(" ", text).lower().replace("’", "'")))


def hedge_refusal(answer: str, allowed_words: frozenset[str] | set[str] = frozenset()) -> str | None:
    """Why ``answer`` is a hedge rather than one answer (a hedge word or ``?``), else ``None``.

    Needs no ground truth; words in ``allowed_words`` (those of the gold) are not hedges.

    >>> hedge_refusal("17 (or maybe 18)")
    "hedge word 'maybe'"
    >>> hedge_refusal(r"\\frac{14}{3}") is None
    True
    """
    found = sorted((words(answer) & HEDGE_WORDS) - set(allowed_words))
    if found:
        return f"hedge word {found[0]!r}"
    if "?" in answer:
        return "question mark"
    return None


def revision_refusal(text: str) -> str | None:
    """Why text that follows a stated answer revises or hedges it (``Wait, actually ...``), else ``None``."""
    found = sorted(words(text) & REVISION_WORDS)
    return f"revised after the answer ({found[0]!r})" if found else None


def _top_level_items(text: str) -> list[str]:
    """Split on ``,`` and ``;`` outside brackets of any kind (intervals like ``(3,4]`` mix them)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch in ",;" and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items]


def _equation_refusal(item: str) -> str | None:
    """``x = 5`` names the value; ``17 = 18``, ``2 + 16 = 18`` and ``x = 1 = 2`` do not."""
    parts = item.split("=")
    if len(parts) == 1:
        return None
    if len(parts) > 2:
        return "a chain of equations"
    lhs = LATEX_COMMAND_RE.sub(" ", parts[0])
    if not LETTER_RE.search(lhs) or _OPERATOR_RE.search(lhs):
        return "an equation whose left side is not a name"
    return None


_SEPARATOR_RE = re.compile(r"[,;]")
_THIN_SPACE_RE = re.compile(r"\\[,;!]")  # LaTeX spacing commands, not separators


MAX_NESTING = 5
"""Deepest bracket nesting an answer may have (MATH-500's golds nest at most 2 deep)."""


def nesting_depth(text: str) -> int:
    """Deepest nesting of (), [] and {} in ``text`` (unbalanced closers are ignored).

    >>> nesting_depth("\\frac{1}{\\sqrt{2}}")
    2
    """
    depth = deepest = 0
    for ch in text:
        if ch in "({[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")}]" and depth:
            depth -= 1
    return deepest


def answer_refusal(answer: str, gold: str | None = None) -> str | None:
    """Why ``answer`` cannot be compared with ``gold`` as one answer, else ``None``.

    Refused: empty or over :data:`MAX_ANSWER_CHARS`; hedge words and ``?``
    (:func:`hedge_refusal`); relations and set operations (``\\pm``, ``<``, ``\\approx``,
    ``\\cup``, ``\\ldots``...); several comma- or semicolon-separated values; numbers
    separated only by spacing; prose between numbers; equations unless the left side is a
    name (``x = 5``); digit runs over :data:`MAX_DIGITS`; power towers, exponents and
    factorials too large to evaluate. Whatever appears in ``gold`` itself is allowed
    (a list gold allows lists, ``1 \\pm \\sqrt{19}`` allows ``\\pm``, ``y = 2x + 3`` allows
    equations). ``gold=None`` applies every rule.

    >>> answer_refusal("17, 18", "18")
    'several values (2)'
    >>> answer_refusal("-2, 1", "1,-2") is None
    True
    >>> answer_refusal("9 9", "18")
    'numbers separated only by spaces'
    >>> answer_refusal("19 (18)", "18")
    'a second number in parentheses'
    """
    if not isinstance(answer, str):
        return "not a string"
    answer = " ".join(answer.split())
    if not answer:
        return "empty answer"
    if len(answer) > MAX_ANSWER_CHARS:
        return f"answer longer than {MAX_ANSWER_CHARS} characters"
    if nesting_depth(answer) > MAX_NESTING:
        # SymPy's LaTeX parser is exponential in brace depth: ${{{...1}}}$ hits its timeout.
        return f"brackets nested deeper than {MAX_NESTING}"
    gold = " ".join(gold.split()) if isinstance(gold, str) else ""
    hedge = hedge_refusal(answer, words(gold))
    if hedge is not None:
        return hedge
    # A unit after the number is no second value ("42 cm^2", "42\\,\\text{cm}"); a number in words is.
    answer = strip_unit_words(answer, gold)
    spelled = sorted((words(answer) & NUMBER_WORDS) - words(gold))
    if spelled:
        return f"a number in words ({spelled[0]!r})"
    gold_symbols = set(_SYMBOL_RE.findall(gold))
    symbols = sorted(set(_SYMBOL_RE.findall(answer)) - gold_symbols)
    if symbols:
        return f"relation or set symbol {symbols[0]!r}"
    joined, gold_joined = join_digit_groups(answer), join_digit_groups(gold)
    longest = max((len(d) for d in _DIGITS_RE.findall(joined)), default=0)
    if longest > max(MAX_DIGITS, *(len(d) for d in _DIGITS_RE.findall(gold_joined)), 0):
        return f"a number with {longest} digits"
    items, gold_items = _top_level_items(joined), _top_level_items(gold_joined)
    if len(items) > 1 and len(gold_items) == 1:
        return f"several values ({len(items)})"
    if _SEPARATOR_RE.search(_THIN_SPACE_RE.sub("", joined)) and not _SEPARATOR_RE.search(gold_joined):
        # A bracketed list ("\{19, 20\}", "(19, 20)") is one top-level item but several values; a gold
        # without any separator is one value (math-verify counts a set holding it as equal).
        return "several values in brackets"
    if _SPACED_NUMBERS_RE.search(_INVISIBLE_RE.sub(" ", joined)) and not _SPACED_NUMBERS_RE.search(gold_joined):
        return "numbers separated only by spaces"
    if _ASIDE_NUMBER_RE.search(joined) and not _ASIDE_NUMBER_RE.search(gold_joined):
        return "a second number in parentheses"
    # Prose between two numbers ("18 apples and 17 pears", "18 because 9*2 = 18").
    gaps = _DIGITS_RE.split(LATEX_COMMAND_RE.sub(" ", joined).lower())[1:-1]
    if any(_PROSE_RE.search(gap) for gap in gaps) and not words(gold):
        return "prose between numbers"
    if "=" not in gold:
        for item in items:
            reason = _equation_refusal(item)
            if reason is not None:
                return reason
    for pattern, what in (
        (_TOWER_RE, "a power tower"),
        (_BIG_EXPONENT_RE, "an exponent over 999"),
        (_BIG_FACTORIAL_RE, "a factorial over 999!"),
    ):
        if pattern.search(joined) and not pattern.search(gold_joined):
            return what
    return None
