"""Reading the one final answer of a math response: the location rules of the math verifier contract.

``docs/verifiers/math.md`` states the contract; :mod:`teamrl.tasks.math_shape` holds the rules
about the answer itself (hedges, lists, relations).
Everything here is linear in the length of the text: no regex backtracks over a run it
already scanned, no slice is taken per match. Never raises on ``str`` input.
"""

from __future__ import annotations

import re
from fractions import Fraction

from teamrl.tasks import math_shape
from teamrl.tasks.math_markup import normalize_markup, unwrap_answer
from teamrl.tasks.math_words import spelled_numbers, spelled_value

__all__ = ["extract_boxed", "extract_final_answer", "locate_final_answer"]


_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\b")
_BARE_BOX_ARG_RE = re.compile(r"[^\s$]+")
# "The answer is", "Final answer:", "**Final Answer:**", "Answer =", "####". One optional run of
# spaces next to another optional one would backtrack quadratically, hence (?:\*+[ \t]*)?.
_ANSWER_MARKER_RE = re.compile(
    r"####|\b(?:the[ \t]+)?(?:final[ \t]+)?answer(?:[ \t]+is\b[ \t]*:?|[ \t]*(?:\*+[ \t]*)?[:=])",
    re.IGNORECASE,
)
# A heading line "**Final Answer**" / "## Final Answer": the answer is on the next line.
_ANSWER_HEADING_RE = re.compile(r"^[ \t#*>-]*(?:the[ \t]+)?final[ \t]+answer[ \t*#:]*$", re.IGNORECASE | re.MULTILINE)
# Where a bare last line's value starts: "... = 7", "the total is 18", "Total: 18".
_CONNECTIVE_RE = re.compile(r"=|(?<![\w\\])(?:is|are|equals?|gives?|get|got|obtain|have|be)\b|:(?=\s)", re.IGNORECASE)
_LINK_AT_END_RE = re.compile(r"(?:=|(?<![\w\\])(?:is|are|equals?|gives?|get|got|obtain|have|be)|:)$", re.IGNORECASE)
_THOUSANDS_RE = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
# A period that ends a sentence rather than sitting inside a number like 3.5;
# also one just inside closing math, as in "is $x^2.$ Then".
_SENTENCE_END_RE = re.compile(r"\.\$?(?=\s|$)")
_SQUARED_RE = re.compile(r"\^\s*\{?\s*[23]\s*\}?")  # "cm^2" after an answer is a unit, not a number
_PLAIN_VALUE_RE = re.compile(r"-?(?:\d{1,60}(?:\.\d{1,60})?|\.\d{1,60})")
_DIGIT_RE = re.compile(r"\d")
_PROSE_WORD_RE = re.compile(r"[A-Za-z]{2,}")
_LETTER_RE, _LATEX_COMMAND_RE = math_shape.LETTER_RE, math_shape.LATEX_COMMAND_RE
_TEXT_ARG_RE = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mathbb|mbox|operatorname|begin|end)\s*\{[^{}]*\}")
_ANSWER_KEY_RE = re.compile(r"\s+|\\left|\\right|\$|\\[,;:! ]")
_INNER_DOLLAR_RE = re.compile(r"(?<!\\)\$")
_MATH_MARK_RE = re.compile(r"\\[A-Za-z]|\$[^$\n]{0,200}?[A-Za-z0-9][^$\n]{0,200}?\$")  # LaTeX or a math segment in text
# A number, then the same number in words in parentheses: "42 (forty-two)", "13.5 (thirteen and a half) cm".
_SPELLED_ASIDE_RE = re.compile(r"^(-?\d{1,3}(?:,\d{3})*(?:\.\d+)?|-?\d+(?:\.\d+)?)\s*\(([A-Za-z -]{1,120})\)(.*)$")
# A number with its sign ("so -5": the minus belongs to it; in "17-5" it is an operator).
_NUMBER_RE = re.compile(
    r"(?<![\w.])-?(?=[\d.])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)|(?<=\w)\d+(?:\.\d+)?"
)
# Words that make a prose sentence's number a bound, a guess or one option rather than the answer.
_PROSE_HEDGE_WORDS = (math_shape.HEDGE_WORDS - {"and", "to", "from", "through", "till", "until"}) | frozenset(
    "than least most over under below above exceeds may".split()
)
# A sentence's end that states its number: a stating verb, then the number, then nothing but punctuation.
_STATED_AT_END_RE = re.compile(
    r"\b(?:is|are|was|were|has|have|had|gets?|got|makes?|made|equals?|totals?|comes to|leaves?|remains?)"
    r"\s+(-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)\s*$",
    re.IGNORECASE,
)
MAX_LAST_LINE_CHARS = 1000
"""A last line longer than this is not read as an answer (the fallback without a marker)."""


def _matching_braces(text: str) -> dict[int, int]:
    """Map each ``{`` that gets closed to the index of its ``}``, in one linear pass.

    Backslash escapes (``\\{``, ``\\}``) do not count towards the nesting depth.
    One pass instead of a scan per ``\\boxed`` keeps adversarial input
    (thousands of unclosed boxes) linear.
    """
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


def _box_spans(text: str) -> list[tuple[int, int, int, int]]:
    """(box start, content start, content end, box end) of every complete box, in text order."""
    matches = list(_BOXED_RE.finditer(text))
    if not matches:
        return []
    pairs = _matching_braces(text)
    spans = []
    for m in matches:
        j = m.end()
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            close = pairs.get(j)
            if close is not None:
                spans.append((m.start(), j + 1, close, close + 1))
        elif j > m.end():
            # "\boxed 5": the argument is the next run of non-space, non-$ characters.
            arg = _BARE_BOX_ARG_RE.match(text, j)
            if arg is not None:
                spans.append((m.start(), j, arg.end(), arg.end()))
    return spans


def extract_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` or ``\\fbox{...}``, or ``None``.

    Nested braces are balanced (``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``).
    A trailing box that never closes (truncated generation) is skipped in favour
    of the last complete one. The brace-less form ``\\boxed 5`` is accepted too.
    Empty boxes do not count. (A response's *answer* follows stricter rules:
    :func:`locate_final_answer`.)

    >>> extract_boxed(r"so $x = \\boxed{\\frac{1}{2}}$.")
    '\\\\frac{1}{2}'
    >>> extract_boxed("no box here") is None
    True
    """
    if not isinstance(text, str):
        return None
    for _, start, end, _ in reversed(_box_spans(text)):
        content = text[start:end].strip()
        if content:
            return content
    return None


def _clean_answer(value: str) -> str | None:
    """An answer snippet without its wrapping: ``**``, ``$``, ``\\(..\\)``, ``\\$``, a final period."""
    value = " ".join(value.split()).strip("* ")
    for left, right in (("$$", "$$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if value.startswith(left) and value.endswith(right) and len(value) >= len(left) + len(right):
            value = value[len(left) : len(value) - len(right)]
    value = value.strip()
    if value.startswith("\\$"):
        value = value[2:]  # "\$18": an escaped dollar sign in LaTeX
    value = value.strip("$").strip().rstrip(".,;:").strip().strip("$").strip()
    # "$42$ dollars": math delimiters inside the answer are formatting, not a second value.
    value = " ".join(_INNER_DOLLAR_RE.sub(" ", value).split())
    aside = _SPELLED_ASIDE_RE.match(value)
    if aside is not None and spelled_value(aside.group(2)) == Fraction(aside.group(1).replace(",", "")):
        value = f"{aside.group(1)}{aside.group(3)}"  # "42 (forty-two)" states 42 once
    value = unwrap_answer(value)
    if _THOUSANDS_RE.match(value):
        value = value.replace(",", "")
    return value or None


def _answer_key(value: str) -> str:
    """Spelling-insensitive form, to tell whether two boxes state the same answer."""
    value = value.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return _ANSWER_KEY_RE.sub("", value).rstrip(".")


def _line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Start of the line holding ``start`` and end of the line holding ``end``."""
    line_end = text.find("\n", end)
    return text.rfind("\n", 0, start) + 1, len(text) if line_end < 0 else line_end


def _lead_refusal(lead: str) -> str | None:
    found = sorted(math_shape.words(lead) & math_shape.LEAD_HEDGE_WORDS)
    return f"hedged before the answer ({found[0]!r})" if found else None


def _number_value(text: str) -> Fraction | None:
    """The value of a plain number ("1,250", "13.50", "-3"), else None."""
    text = text.replace(",", "").strip()
    return Fraction(text) if _PLAIN_VALUE_RE.fullmatch(text) else None


def _tail_refusal(text: str, start: int, line_end: int, answer: str | None = None) -> str | None:
    """Whether what follows an answer on its line, and after it, revises or adds to it.

    A check that restates the answer on its line ("The answer is 42. So, Tom has 42 marbles.",
    "\\boxed{42}. Check: 17 + 25 = 42") adds nothing: its last number, and any number it spells, is the
    answer's. Any other number after the answer is a second value.
    """
    same_line = text[start:line_end]
    if _ANSWER_MARKER_RE.search(same_line):
        return "a second answer on the answer line"
    value = _number_value(answer) if answer is not None else None
    numbers = _NUMBER_RE.findall(_SQUARED_RE.sub("", same_line))
    if numbers and (value is None or _number_value(numbers[-1]) != value):
        return "another number after the answer"
    if any(spelled != value for spelled in spelled_numbers(same_line)):
        return "another number after the answer"
    if not numbers and _MATH_MARK_RE.search(same_line):
        return "another value after the answer"  # "\\text{Evelyn} + 1. So, Tom has \\text{Evelyn} marbles."
    return math_shape.revision_refusal(same_line) or math_shape.revision_refusal(text[line_end:])


def _boxed_answer(text: str, spans: list[tuple[int, int, int, int]]) -> tuple[str | None, str]:
    outer, last_end = [], -1
    for span in spans:
        if span[0] >= last_end and text[span[1] : span[2]].strip():
            outer.append(span)
            last_end = span[3]
    if not outer:
        return None, "only empty boxes"
    answers = [text[s[1] : s[2]] for s in outer]
    keys = {_answer_key(a) for a in answers}
    if len(keys) > 1:
        return None, f"{len(keys)} boxes with different answers"
    line_start, line_end = _line_bounds(text, outer[-1][0], outer[-1][3])
    reason = _lead_refusal(text[line_start : outer[-1][0]]) or _tail_refusal(
        text, outer[-1][3], line_end, _clean_answer(answers[-1])
    )
    if reason is None:
        later = _marker_answer(text, outer[-1][3])
        if later[0] is not None and _answer_key(later[0]) not in keys:
            reason = "a later answer line disagrees with the box"
    answer = _clean_answer(answers[-1])
    if reason is not None or answer is None:
        return None, reason or "empty box"
    return answer, "boxed"


def _marker_answer(text: str, start: int = 0) -> tuple[str | None, str]:
    """The answer on the last marker line ("The answer is X") at or after ``start``."""
    last = None
    for last in _ANSWER_MARKER_RE.finditer(text, start):
        pass
    heading = None
    for heading in _ANSWER_HEADING_RE.finditer(text, start):
        pass
    if last is None and heading is None:
        return None, "no answer marker"
    if heading is not None and (last is None or heading.start() > last.start()):
        line_start, pos, line_end = heading.start(), heading.end(), heading.end()
    else:
        assert last is not None
        line_start, line_end = _line_bounds(text, last.start(), last.end())
        first = _ANSWER_MARKER_RE.search(text, line_start, line_end)
        pos = first.end() if first is not None else last.end()
        # "Final Answer: The final answer is $X$": markers right after a marker are one marker.
        while True:
            while pos < line_end and text[pos] in " \t*":
                pos += 1
            nested = _ANSWER_MARKER_RE.match(text, pos, line_end)
            if nested is None:
                break
            pos = nested.end()
        if first is not None:
            reason = _lead_refusal(text[line_start : first.start()])
            if reason is not None:
                return None, reason
    if not text[pos:line_end].strip():
        # The value is on the next non-empty line ("Final answer:\n18", "**Final Answer**\n18").
        nxt = pos
        while nxt < len(text) and text[nxt] in " \t\r\n":
            nxt += 1
        pos, line_end = nxt, _line_bounds(text, nxt, nxt)[1]
    cut = _SENTENCE_END_RE.search(text, pos, line_end)
    value_end = cut.start() if cut is not None else line_end
    answer = _clean_answer(text[pos:value_end])
    reason = _tail_refusal(text, value_end if cut is None else cut.end(), line_end, answer)
    if reason is None and _ANSWER_MARKER_RE.search(text, pos, value_end):
        reason = "a second answer on the answer line"
    if reason is not None or answer is None:
        return None, reason or "an answer marker without a value"
    return answer, "marker"


def _math_segment_at_end(line: str) -> tuple[int, str] | None:
    """(start, content) of a ``$...$`` / ``$$...$$`` / ``\\(...\\)`` / ``\\[...\\]`` ending ``line``."""
    for left, right in (("$$", "$$"), ("\\(", "\\)"), ("\\[", "\\]"), ("$", "$")):
        if line.endswith(right) and len(line) > len(right) and not (right == "$" and line.endswith("\\$")):
            start = line.rfind(left, 0, len(line) - len(right))
            while left == "$" and start > 0 and line[start - 1] == "\\":
                start = line.rfind(left, 0, start - 1)  # "\$36" is an escaped dollar, not math
            if start >= 0:
                return start, line[start + len(left) : len(line) - len(right)]
    return None


def _strip_markdown(line: str) -> str:
    """Drop heading, quote, bold and bullet marks around a line; a leading minus sign stays."""
    i, line = 0, line.strip()
    while i < len(line) and (line[i] in "#>* \t" or (line[i] == "-" and line[i + 1 : i + 2] in (" ", "\t"))):
        i += 1
    return line[i:].rstrip("* \t")


def _last_line_answer(text: str) -> tuple[str | None, str]:
    """A last line that is an answer ("7", "$\\frac{14}{3}$") or ends with one ("so 3 + 4 = 7")."""
    end = len(text.rstrip())
    line = _strip_markdown(text[text.rfind("\n", 0, end) + 1 : end]).rstrip(" .,;!*").strip()
    if not line:
        return None, "no answer"
    if len(line) > MAX_LAST_LINE_CHARS:
        return None, "a last line too long to be an answer"
    segment = _math_segment_at_end(line)
    if segment is not None:
        start, value = segment
        lead = line[:start].rstrip()
        if lead and not _LINK_AT_END_RE.search(lead) and (_DIGIT_RE.search(lead) or "$" in lead or "\\(" in lead):
            return None, "a last line with several values and no answer marker"
        # "$3 + 4 = 7$": the value after the last "=" when what precedes it is plain arithmetic.
        eq = value.rfind("=")
        if eq >= 0 and not _LETTER_RE.search(value[:eq]):
            value = value[eq + 1 :]
    else:
        eq = line.rfind("=")
        link = None
        if eq >= 0 and not _LETTER_RE.search(line[:eq]):
            lead, value = line[:eq], line[eq + 1 :]  # "3+7=10", "12-5=7, 7+3=10": the result
        elif not _PROSE_WORD_RE.search(_LATEX_COMMAND_RE.sub(" ", line)):
            lead, value = "", line  # a formula line: "5x - 7y + 11z + 4 = 0", "x = 4", "p - q"
        else:
            for link in _CONNECTIVE_RE.finditer(line):
                pass
            lead, value = (line[: link.start()], line[link.end() :]) if link is not None else ("", line)
        bare = _LATEX_COMMAND_RE.sub(" ", _TEXT_ARG_RE.sub(" ", math_shape.without_unit_words(line)))
        if link is None and _PROSE_WORD_RE.search(bare):
            return _prose_sentence_answer(line)
    reason = _lead_refusal(lead)
    answer = _clean_answer(value)
    if reason is not None or answer is None:
        return None, reason or "no answer"
    return answer, "last line"


def _prose_sentence_answer(line: str) -> tuple[str | None, str]:
    """The number of a last sentence that states exactly one ("So, Tom has 42 marbles."), else no answer.

    Refused: a second number, in digits or in words ("42 marbles and 3 cars", "42 marbles and forty cars"),
    a question, or a word that makes the number a bound, a guess or an option ("about 42", "more than 42",
    "may have 42"). A sentence of words only ("need tool") states no number.
    """
    sentences = [piece for piece in _SENTENCE_END_RE.split(line) if piece.strip()]
    sentence = sentences[-1] if sentences else ""
    if "?" in sentence or math_shape.words(sentence) & _PROSE_HEDGE_WORDS:
        return None, "a last line of prose"
    numbers = {_number_value(n) for n in _NUMBER_RE.findall(_SQUARED_RE.sub("", sentence))}
    spelled = set(spelled_numbers(sentence))
    stated = _STATED_AT_END_RE.search(sentence)
    if stated is not None and not spelled:
        # "After counting all 9 pens, the farmer has 63": a sentence that ends by stating a number
        # states that one; the numbers before it are the work.
        return _clean_answer(stated.group(1)), "last line"
    if len(numbers) != 1 or not spelled <= numbers:
        return None, "a last line of prose"  # no number, or several: which one is the answer?
    return _clean_answer(_NUMBER_RE.findall(_SQUARED_RE.sub("", sentence))[-1]), "last line"


def locate_final_answer(text: str, last_line_fallback: bool = True) -> tuple[str | None, str]:
    """(the one answer of a math response, how it was found), or (``None``, why there is none).

    The rules (``docs/verifiers/math.md``): only the text after the last ``</think>`` counts
    (an unclosed ``<think>`` has no answer). Then, in order: (1) boxes: every non-empty
    ``\\boxed{}`` / ``\\fbox{}`` must state the same answer, else there is none; (2) the last
    answer line ("The answer is X", "Final answer: X", "Answer: X", "#### X", or a
    "**Final Answer**" heading with X on the next line), X cut at the first sentence end;
    (3) with ``last_line_fallback``, the last line when it is an answer or ends with one
    after ``=`` / ``is`` / ``:`` (the whole of a trailing ``$...$``, never a number from
    inside it). Refused: hedges right before the answer on its line ("either ... or"), a
    number, a second marker or a revision ("wait", "actually", "or maybe") after it. How is
    ``"boxed"``, ``"marker"`` or ``"last line"``. Never raises; linear in ``len(text)``.

    >>> locate_final_answer("So the final answer is $\\\\frac{14}{3}$. I hope it is correct.")
    ('\\\\frac{14}{3}', 'marker')
    >>> locate_final_answer(r"\\boxed{17} or \\boxed{18}")
    (None, '2 boxes with different answers')
    """
    if not isinstance(text, str) or not text.strip():
        return None, "no answer"
    think_end = text.rfind("</think>")
    if think_end >= 0:
        text = text[think_end + len("</think>") :]
    elif "<think>" in text:
        return None, "the response never finished thinking"
    text = normalize_markup(text)
    spans = _box_spans(text)
    if spans:
        return _boxed_answer(text, spans)
    answer, how = _marker_answer(text)
    if answer is not None or how != "no answer marker" or not last_line_fallback:
        return answer, how
    return _last_line_answer(text)


def extract_final_answer(text: str, last_line_fallback: bool = True) -> str | None:
    """The final answer of a math response as a short string, or ``None``: see :func:`locate_final_answer`.

    Surrounding ``$``, ``\\$``, ``**``, ``\\(...\\)``, spaces and a trailing period are
    removed; thousands separators in a plain number are dropped (``1,000`` -> ``1000``).
    The answer is returned as written: whether it hedges or lists candidates is the
    verifier's call (:func:`teamrl.tasks.math_shape.answer_refusal`).

    >>> extract_final_answer("3 + 4 = 7. The answer is $7$.")
    '7'
    >>> extract_final_answer("She pays 2 * 9 = 18 dollars")
    '18 dollars'
    >>> extract_final_answer(r"Thus \\boxed{\\dfrac{3}{4}}")
    '\\\\dfrac{3}{4}'
    """
    return locate_final_answer(text, last_line_fallback)[0]
