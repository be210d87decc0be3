"""The markup a model wraps its final answer in, taken off before the answer is located and read.

Models write one answer in many dresses: `**25**`, `\\textbf{25}`, `$\\mathbf{25}$`, `` `25` ``, a fenced
block holding only `25`, full-width `２５`, a Unicode minus `−3`, `25！` or `25。`, an emoji after it,
"twenty-five (25)", "25 (since 22 + 3 = 25)", "(-3)". :func:`normalize_markup` rewrites each of these
to the plain text a reader sees (`25`, `-3`), so that the location and shape rules of the math verifier
(`teamrl.tasks.math_parsing`, `teamrl.tasks.math_shape`) judge what was said, not how it was typeset.

What it never does: drop a number a reader would read as a second value, or a word that hedges. An
aside is dropped only when it restates the number before it (its last number is that number, and it
has no hedge word); spelled words are merged only with digits of the same value. Every rewrite is a
regex over one line or one short group: linear in the text, never raising on `str` input.
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction

from teamrl.tasks.math_shape import HEDGE_WORDS, REVISION_WORDS, ascii_digits, words
from teamrl.tasks.math_words import spelled_value

__all__ = ["normalize_markup", "unwrap_answer"]

# Full-width ASCII (U+FF01..U+FF5E) is ASCII; CJK sentence punctuation is its ASCII counterpart;
# the Unicode minus and its look-alikes are a minus.
_WIDTH: dict[int, int | str] = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}
_WIDTH.update(
    {
        0x3002: ".",
        0xFF61: ".",
        0x3001: ",",
        0x3000: " ",
        0x2212: "-",
        0xFE63: "-",
        0x2796: "-",
        0x00A0: " ",
        0x2009: " ",
        0x202F: " ",
    }
)
_MAX_GROUP = 200  # a formatting group longer than this is prose, not an answer's wrapper

# Formatting commands around a group: the group is what is printed. (\mathrm and \textrm stay: they
# typeset units, `42\ \mathrm{cm^2}`, which the unit rules read whole.)
_FORMAT_CMD_RE = re.compile(
    r"\\(?:textbf|mathbf|boldsymbol|bm|pmb|textit|emph|mathit|textsf|mathsf|"
    r"underline|textnormal)\s*\{"
)
# \text{25} / \mbox{-3}: a number typeset as text is that number (a unit or a name in \text{} stays).
_TEXT_NUMBER_RE = re.compile(r"\\(?:text|mbox|hbox)\s*\{\s*(-?[\d.,]+)\s*\}")
# Markdown emphasis and code spans, innermost text only: ***x***, **x**, __x__, *x*, `x`.
_EMPHASIS_RES = (
    re.compile(rf"(?<![\w*\\])\*\*\*(?=\S)([^*\n]{{1,{_MAX_GROUP}}}?)(?<=\S)\*\*\*(?![\w*])"),
    re.compile(rf"(?<![\w*\\])\*\*(?=\S)([^*\n]{{1,{_MAX_GROUP}}}?)(?<=\S)\*\*(?![\w*])"),
    re.compile(rf"(?<![\w_\\])__(?=\S)([^_\n]{{1,{_MAX_GROUP}}}?)(?<=\S)__(?![\w_])"),
    re.compile(rf"(?<![\w*\\])\*(?=[^\s*])([^*\n]{{1,{_MAX_GROUP}}}?)(?<=[^\s*])\*(?![\w*])"),
    re.compile(rf"(?<!`)`([^`\n]{{1,{_MAX_GROUP}}})`(?!`)"),
)
# Math delimiters around nothing but a number: $25$, $$ 25 $$, \( 25 \), \[ 25 \] (an escaped \$ is money).
_MATH_NUMBER_RE = re.compile(
    r"(?<!\\)(\$\$|\$|\\\[|\\\()[ \t]{0,3}([+-]?(?:\d{1,3}(?:,\d{3}){1,12}|\d{1,40})(?:\.\d{1,20})?)[ \t]{0,3}(\$\$|\$|\\\]|\\\))"
)
_MATH_CLOSERS = {"$$": "$$", "$": "$", "\\[": "\\]", "\\(": "\\)"}
# HTML emphasis and code tags around a short span.
_HTML_RE = re.compile(r"<(b|strong|i|em|u|code|mark)>([^<>\n]{1,200})</\1>", re.IGNORECASE)
# A fenced block of at most three short lines, untagged or tagged as text or math: its content is an answer.
_FENCE_RE = re.compile(
    r"```[ \t]*(?:text|plaintext|txt|latex|tex|math|markdown|md)?[ \t]*\n"
    r"((?:[^\n`]{0,200}\n){1,3}?)[ \t]*```"
)
# A decoration after the text: emoji and pictographs (Unicode "other symbol"), the degree sign excepted.
_KEEP_SYMBOLS = frozenset("°©®™")
# "!" that ends a sentence right after a number or closing markup (not a factorial inside math).
_BANG_RE = re.compile(r"(?<=[\d*_`)}\]$])!+(?=[ \t]*(?:$|\n))|(?<=[\d*_`)}\]$])!+(?=[ \t]+[A-Z])")
# A clause in a script without spaces (CJK) and without digits, after punctuation at a line's end.
_CJK_TAIL_RE = re.compile(
    r"(?<=\S)[ \t]{0,3}[,.;:!][ \t]{0,3}[\u2E80-\u9FFF\uAC00-\uD7AF\u3040-\u30FF]"
    r"[^\n\d,.;:!]{0,60}[.!]?[ \t]{0,3}(?=\n|$)"
)
# A number, matched only from the start of its digit run and at most 60 characters long, so that no
# pattern built on it rescans a long run of digits from every position inside it (linear time).
_NUMBER = r"(?<![\d,.])-?(?:\d{1,3}(?:,\d{3}){1,12}|\d{1,40})(?:\.\d{1,20})?(?![\d,]\d)"
# "twenty-five (25)", "Negative five (-5)": the words then the same number in digits.
_SPELLED_FIRST_RE = re.compile(
    rf"(?<![A-Za-z])((?:negative |minus )?[A-Za-z]{{1,12}}(?:[ -][A-Za-z]{{1,12}}){{0,12}})[ \t]?\([ \t]?({_NUMBER})[ \t]?\)"
)
# A number, then a parenthetical aside that justifies it: "(since 22 + 3 = 25)". (Unbracketed prose between
# numbers, "18 because 9 * 2 = 18", stays a second value: docs/verifiers/math.md.)
_JUSTIFIED_RE = re.compile(
    rf"({_NUMBER})([*_`$}}\\)]{{0,6}})([ \t]{{0,3}}\((?:since|because|as|by|from|check(?:ing)?|note)\b[^()\n]{{0,160}}\))",
    re.IGNORECASE,
)
_LAST_NUMBER_RE = re.compile(_NUMBER)
# "(-3)" standing alone as the answer: a negative number in parentheses.
_PAREN_NEGATIVE_RE = re.compile(r"^\(\s*(-\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*\)$")  # not "(-2,1)"
_LEADING_PLUS_RE = re.compile(r"^\+\s*(?=\d)")  # "+25" states 25
_DEGREE_RE = re.compile(r"\s*°")
# "25% of the students", "70° in all": a number with its sign, then words only.
_SIGNED_NUMBER_PROSE_RE = re.compile(rf"^({_NUMBER}\s*(?:\\?%|\^\\circ))\s+([A-Za-z][A-Za-z .'-]{{0,80}})$")


def _value(text: str) -> Fraction | None:
    try:
        return Fraction(text.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


def _spelled(words_text: str) -> Fraction | None:
    lowered = words_text.lower()
    for sign in ("negative ", "minus "):
        if lowered.startswith(sign):
            value = spelled_value(lowered[len(sign) :])
            return None if value is None else -value
    return spelled_value(lowered)


def _spelled_first(match: re.Match[str]) -> str:
    """ "twenty-five (25)" -> "25"; the longest run of words before the digits that spells them."""
    words_text, digits = match.group(1), match.group(2)
    target = _value(digits)
    tokens = words_text.split(" ")
    for start in range(len(tokens)):  # "is twenty-five (25)": the spelled run may follow other words
        candidate = " ".join(tokens[start:])
        if target is not None and _spelled(candidate) == target:
            lead = " ".join(tokens[:start])
            return f"{lead} {digits}" if lead else digits
    return match.group(0)


def _justified(match: re.Match[str]) -> str:
    """Drop an aside that restates the number before it; keep one that adds a value or hedges."""
    number, closing, aside = match.groups()
    found = _LAST_NUMBER_RE.findall(aside)
    hedged = words(aside) & (HEDGE_WORDS | REVISION_WORDS) - {"from", "to", "and"}
    if found and not hedged and _value(found[-1]) == _value(number):
        return number + closing
    return match.group(0)


def _brace_pairs(text: str) -> dict[int, int]:
    """Each `{` that gets closed -> its `}`, in one pass (escaped braces do not count)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            pairs[stack.pop()] = i
    return pairs


def _unwrap_commands(text: str) -> str:
    """`\\textbf{x}` -> `x` for each formatting command whose group closes within `_MAX_GROUP` characters
    (its braces balanced: `\\mathbf{\\frac{1}{2}}` -> `\\frac{1}{2}`); a group left open stays as written."""
    matches = list(_FORMAT_CMD_RE.finditer(text))
    if not matches:
        return text
    pairs = _brace_pairs(text)
    out, pos = [], 0
    for match in matches:
        close = pairs.get(match.end() - 1)
        if match.start() < pos or close is None or close - match.end() > _MAX_GROUP:
            continue  # inside a group already unwrapped (the next pass takes it), or no short group
        out += [text[pos : match.start()], text[match.end() : close]]
        pos = close + 1
    return "".join(out) + text[pos:]


def _strip_decorations(text: str) -> str:
    if text.isascii():
        return text
    return "".join(ch for ch in text if ch in _KEEP_SYMBOLS or unicodedata.category(ch) not in ("So", "Cf"))


def normalize_markup(text: str) -> str:
    """`text` with answer markup taken off: see the module docstring.

    >>> normalize_markup("The answer is **\\\\textbf{２５}**！ 🎉")
    'The answer is 25.'
    >>> normalize_markup("Answer: twenty-five (25) (since 22 + 3 = 25)")
    'Answer: 25'
    >>> normalize_markup("Answer: 25 (or maybe 26)")
    'Answer: 25 (or maybe 26)'
    """
    if not isinstance(text, str):
        return text
    text = ascii_digits(text.translate(_WIDTH))
    text = _strip_decorations(text)
    text = _FENCE_RE.sub(lambda m: m.group(1).strip("\n"), text)
    for _ in range(3):  # nested wrappers: **\textbf{25}**, ***`25`***
        before = text
        text = _unwrap_commands(text)
        text = _TEXT_NUMBER_RE.sub(r"\1", text)
        for pattern in _EMPHASIS_RES:
            text = pattern.sub(r"\1", text)
        text = _HTML_RE.sub(r"\2", text)
        text = _MATH_NUMBER_RE.sub(
            lambda m: m.group(2) if _MATH_CLOSERS[m.group(1)] == m.group(3) else m.group(0), text
        )
        if text == before:
            break
    text = _BANG_RE.sub(".", text)
    text = _CJK_TAIL_RE.sub(".", text)
    text = _SPELLED_FIRST_RE.sub(_spelled_first, text)
    text = _JUSTIFIED_RE.sub(_justified, text)
    return "\n".join(line.rstrip() for line in text.split("\n"))


def unwrap_answer(answer: str) -> str:
    """One located answer without the wrapping that only typesets it: `(-3)` is -3.

    >>> unwrap_answer("(-3)"), unwrap_answer("(-2,1)"), unwrap_answer("25% of the students"), unwrap_answer("70°")
    ('-3', '(-2,1)', '25%', '70^\\\\circ')
    """
    answer = _LEADING_PLUS_RE.sub("", answer.strip())
    match = _PAREN_NEGATIVE_RE.match(answer)
    if match:
        return match.group(1).replace(" ", "")
    answer = _DEGREE_RE.sub(lambda _: "^\\circ", answer)  # math-verify reads the LaTeX degree, not the sign
    prose = _SIGNED_NUMBER_PROSE_RE.match(answer)
    if prose and not words(prose.group(2)) & HEDGE_WORDS - {"of"}:
        return prose.group(1)
    return answer
