"""Numbers written in English words: "42 (forty-two)" states one value, "42 (forty-three)" two.

Models often spell an answer out beside its digits; the math verifier accepts that aside only when
it names the same number (:func:`teamrl.tasks.math_parsing.locate_final_answer`), and counts spelled
numbers as values when it asks whether a prose sentence states exactly one.
Pure functions, linear in their input, never raising on ``str`` input.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["NUMBER_WORDS", "number_in_words", "spelled_numbers", "spelled_value"]

_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_VALUES = {**{w: i for i, w in enumerate(_UNITS)}, **{w: 10 * i for i, w in enumerate(_TENS) if i >= 2}}
_FRACTIONS = {"half": Fraction(1, 2), "quarter": Fraction(1, 4)}
NUMBER_WORDS = frozenset(_VALUES) | frozenset(_SCALES) | frozenset(_FRACTIONS)
"""Words that name a number (or a part of one): counted as values in prose."""
_TOKEN_RE = re.compile(r"[a-z]+")


def spelled_value(text: str) -> Fraction | None:
    """The number `text` spells, or None when it is anything else (a word that names no number).

    Reads "forty-two", "one hundred thirty-five", "two thousand and ten", "thirteen and a half".

    >>> spelled_value("one hundred thirty-five"), spelled_value("thirteen and a half"), spelled_value("forty-two marbles")
    (Fraction(135, 1), Fraction(27, 2), None)
    """
    words = _TOKEN_RE.findall(text.lower().replace("-", " "))
    if not words or len(words) > 20:
        return None
    total, current, seen_number = Fraction(0), Fraction(0), False
    for i, word in enumerate(words):
        if word in _VALUES:
            current += _VALUES[word]
            seen_number = True
        elif word in _SCALES and seen_number:
            if _SCALES[word] == 100:
                current *= 100
            else:
                total, current = total + current * _SCALES[word], Fraction(0)
        elif word == "and" and seen_number and i + 1 < len(words):
            continue
        elif word == "a" and i + 1 < len(words) and words[i + 1] in _FRACTIONS:
            continue
        elif word in _FRACTIONS and seen_number and i == len(words) - 1:
            current += _FRACTIONS[word]
        else:
            return None
    return total + current if seen_number else None


def number_in_words(n: int) -> str:
    """`n` (0 <= n < 10**12) in words, the way "forty-two" is written.

    >>> number_in_words(42), number_in_words(1250)
    ('forty-two', 'one thousand two hundred fifty')
    """
    if not 0 <= n < 10**12:
        raise ValueError(f"number_in_words reads 0 <= n < 10**12, got {n}")
    if n < 20:
        return _UNITS[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _UNITS[n % 10])
    if n < 1000:
        rest = n % 100
        return f"{_UNITS[n // 100]} hundred" + ("" if rest == 0 else " " + number_in_words(rest))
    for name, scale in (("billion", 10**9), ("million", 10**6), ("thousand", 1000)):
        if n >= scale:
            rest = n % scale
            return f"{number_in_words(n // scale)} {name}" + ("" if rest == 0 else " " + number_in_words(rest))
    raise AssertionError("unreachable")


_NUMBER_WORD = r"(?:" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")"
# A run of number words: "forty-two", "one hundred and thirty-five", "thirteen and a half".
_SPELLED_RUN_RE = re.compile(
    rf"\b{_NUMBER_WORD}\b(?:(?:[\s-]+(?:and[\s-]+)?(?:a[\s-]+)?){_NUMBER_WORD}\b){{0,19}}", re.IGNORECASE
)


def spelled_numbers(text: str) -> list[Fraction | None]:
    """The values of the runs of number words in `text`, in order (None for a run that names none).

    >>> spelled_numbers("forty-two marbles and twelve cars"), spelled_numbers("no numbers here")
    ([Fraction(42, 1), Fraction(12, 1)], [])
    """
    return [spelled_value(m.group(0)) for m in _SPELLED_RUN_RE.finditer(text)]
