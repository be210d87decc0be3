"""Tolerant extraction of structured content from free-form model output.

Everything here is fed text written by language models, from large chat models to
tiny character-level policies at the start of training.  Such text is routinely
malformed: fences that never close, braces that never balance, answers buried in
prose.  The parsers therefore never raise on any ``str`` input; when nothing usable
is found they return ``None`` (or an empty list), and the caller decides what a
missing answer is worth (usually zero reward).
"""

from __future__ import annotations

import ast
import html
import re
import textwrap
import warnings
from typing import Literal

from teamrl.tasks import math_shape

__all__ = [
    "extract_boxed",
    "extract_code_block",
    "extract_final_answer",
    "locate_final_answer",
    "parse_action_list",
    "parse_int_grid",
]

# Language tags that all mean "Python" in a fence info string.
_LANGUAGE_ALIASES: dict[str, str] = {
    "py": "python",
    "py3": "python",
    "python3": "python",
    "ipython": "python",
    "ipython3": "python",
    "pycon": "python",
}

# An opening fence: three or more backticks or tildes.
_OPEN_FENCE_RE = re.compile(r"`{3,}|~{3,}")
# A single-word info string such as ``python`` or ``c++``.
_LANG_TOKEN_RE = re.compile(r"^[A-Za-z][\w+#.-]*$")
# <code>...</code> and [PYTHON]...[/PYTHON]; the closing tag is optional because
# generation is often cut off at the token limit.
_TAG_BLOCK_RES = (
    re.compile(r"<code[^>]*>(.*?)(?:</code>|\Z)", re.DOTALL | re.IGNORECASE),
    re.compile(r"\[PYTHON\](.*?)(?:\[/PYTHON\]|\Z)", re.DOTALL | re.IGNORECASE),
)


def _normalize_language(lang: str | None) -> str:
    lang = (lang or "").strip().lower()
    return _LANGUAGE_ALIASES.get(lang, lang)


def _split_info(info: str) -> tuple[str, str]:
    """Split a fence info string into (language, code written on the fence line).

    ``python`` -> ("python", ""); ``python x = 1`` -> ("python", "x = 1");
    ``x = 1`` -> ("", "x = 1") because a multi-word info string whose first word is
    not a plain tag is more likely code that the model started on the fence line.
    """
    info = info.strip()
    if not info:
        return "", ""
    first, _, rest = info.partition(" ")
    if _LANG_TOKEN_RE.match(first) and (not rest or first.lower() in _KNOWN_LANGS):
        return first, rest.strip()
    return "", info


# Tags that are accepted as a language even when code follows on the same line.
_KNOWN_LANGS = frozenset(
    {"python", "bash", "sh", "shell", "text", "json", "javascript", "js", "cpp", "c", "java"}
    | set(_LANGUAGE_ALIASES)
)


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """All fenced blocks in order as (language, body); an unclosed last fence runs to the end."""
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        m = _OPEN_FENCE_RE.search(text, pos)
        if m is None:
            return blocks
        fence = m.group(0)
        # A closing fence uses the same character and is at least as long.
        close_re = re.compile(re.escape(fence[0]) + "{" + str(len(fence)) + ",}")
        line_end = text.find("\n", m.end())
        if line_end == -1:
            line_end = len(text)
        info_line = text[m.end() : line_end]
        inline_close = close_re.search(info_line)
        if inline_close is not None:
            # ```python print(1)``` written on one line.
            lang, code = _split_info(info_line[: inline_close.start()])
            blocks.append((lang, code))
            pos = m.end() + inline_close.end()
            continue
        lang, first_line_code = _split_info(info_line)
        body_start = min(line_end + 1, len(text))
        close = close_re.search(text, body_start)
        if close is None:
            body, pos = text[body_start:], len(text)
        else:
            body, pos = text[body_start : close.start()], close.end()
        if first_line_code:
            body = first_line_code + "\n" + body
        blocks.append((lang, body))


def _clean_code(body: str) -> str:
    # Fences inside indented list items carry the list indentation on every line.
    return textwrap.dedent(body.replace("\r\n", "\n")).strip()


def parse_python(code: str) -> ast.Module:
    """`ast.parse` for model-written code: without the SyntaxWarnings (`1if x`, `"\\d"`) that Python
    prints to stderr for such text, which would flood a training log. Raises what `ast.parse` raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(code)


def _parses_as_python(code: str) -> bool:
    try:
        parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        # ValueError: null bytes; RecursionError/MemoryError: absurdly nested input.
        return False
    return True


def extract_code_block(text: str, language: str | None = "python") -> str | None:
    """Return the code a model most likely meant as its answer, or ``None``.

    Preference order:

    1. Fenced blocks (```` ``` ```` or ``~~~``). Among them, the last block tagged
       with ``language`` (``py``/``python3`` count as ``python``) wins, then the
       last untagged block, then the last block with any other tag. An unclosed
       final fence runs to the end of the text. Empty blocks are ignored.
       ``language=None`` takes the last non-empty block whatever its tag.
    2. The last ``<code>...</code>`` or ``[PYTHON]...[/PYTHON]`` section (HTML
       entities unescaped; closing tag optional).
    3. If ``language`` is Python and the whole text parses with :func:`ast.parse`,
       the text itself, stripped. Note that a bare word such as ``hello`` is valid
       Python, so this fallback is permissive by design: the caller's tests decide.

    Never raises for ``str`` input.

    >>> extract_code_block("Here:\\n```python\\nprint(1)\\n```\\nDone.")
    'print(1)'
    >>> extract_code_block("```py\\nx = 1\\n")  # unclosed fence
    'x = 1'
    >>> extract_code_block("Sorry, I can't help with that.") is None
    True
    """
    if not isinstance(text, str) or not text.strip():
        return None
    want = _normalize_language(language)
    blocks = [(_normalize_language(lang), _clean_code(body)) for lang, body in _fenced_blocks(text)]
    blocks = [(lang, body) for lang, body in blocks if body]
    if blocks:
        if not want:
            return blocks[-1][1]
        for rank_ok in (lambda lang: lang == want, lambda lang: lang == "", lambda lang: True):
            ranked = [body for lang, body in blocks if rank_ok(lang)]
            if ranked:
                return ranked[-1]
    for tag_re in _TAG_BLOCK_RES:
        tagged = [_clean_code(html.unescape(m.group(1))) for m in tag_re.finditer(text)]
        tagged = [code for code in tagged if code]
        if tagged:
            return tagged[-1]
    if want == "python":
        stripped = text.strip()
        if _parses_as_python(stripped):
            return stripped
    return None


# --------------------------------------------------------------------------- math answers
# The location rules of the math verifier contract (docs/verifiers/math.md); the shape rules
# (hedges, lists, relations) are in teamrl.tasks.math_shape. Everything here is linear in the
# length of the text: no regex backtracks over a run it already scanned, no slice per match.

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
_DIGIT_RE = re.compile(r"\d")
_PROSE_WORD_RE = re.compile(r"[A-Za-z]{2,}")
_LETTER_RE = re.compile(r"[A-Za-z]")
_LATEX_COMMAND_RE = re.compile(r"\\[A-Za-z]+")
_TEXT_ARG_RE = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mathbb|mbox|operatorname|begin|end)\s*\{[^{}]*\}")
_ANSWER_KEY_RE = re.compile(r"\s+|\\left|\\right|\$|\\[,;:! ]")
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


def _tail_refusal(text: str, start: int, line_end: int) -> str | None:
    """Whether what follows an answer on its line, and after it, revises or adds to it."""
    same_line = text[start:line_end]
    if _ANSWER_MARKER_RE.search(same_line):
        return "a second answer on the answer line"
    if _DIGIT_RE.search(_SQUARED_RE.sub("", same_line)):
        return "another number after the answer"
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
    reason = _lead_refusal(text[line_start : outer[-1][0]]) or _tail_refusal(text, outer[-1][3], line_end)
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
    reason = _tail_refusal(text, value_end if cut is None else cut.end(), line_end)
    if reason is None and _ANSWER_MARKER_RE.search(text, pos, value_end):
        reason = "a second answer on the answer line"
    answer = _clean_answer(text[pos:value_end])
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
            return None, "a last line of prose"  # "need tool", "so 7 apples": words beyond units
    reason = _lead_refusal(lead)
    answer = _clean_answer(value)
    if reason is not None or answer is None:
        return None, reason or "no answer"
    return answer, "last line"


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


# --------------------------------------------------------------------------- action lists

# Where an explicit answer starts; only the text after the last marker is parsed.
_ACTION_MARKER_RE = re.compile(r"\b(?:actions?|moves?|answer|solution|path)\s*[:=]", re.IGNORECASE)
_ACTION_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def _segment(token: str, keys: dict[str, str], max_len: int) -> list[str] | None:
    """Split ``token`` entirely into alias keys, preferring long keys; None if impossible."""
    n = len(token)
    # step[i] is the length of the key starting at i in a segmentation of token[i:]
    # (0: none exists). Filled right to left, so the whole thing is O(n * max_len).
    step = [0] * (n + 1)
    ok = [False] * (n + 1)
    ok[n] = True
    for i in range(n - 1, -1, -1):
        for length in range(min(max_len, n - i), 0, -1):
            if ok[i + length] and token[i : i + length] in keys:
                step[i], ok[i] = length, True
                break
    if not ok[0]:
        return None
    pieces: list[str] = []
    i = 0
    while i < n:
        pieces.append(keys[token[i : i + step[i]]])
        i += step[i]
    return pieces


def parse_action_list(
    text: str,
    aliases: dict[str, str],
    on_unknown: Literal["skip", "stop"] = "skip",
) -> list[str]:
    """Parse a sequence of moves into canonical action symbols.

    ``aliases`` maps every accepted spelling to its canonical symbol, e.g.
    ``{"U": "U", "UP": "U", "R": "R", "RIGHT": "R", ...}``; matching is
    case-insensitive. Accepted forms include ``RRDD``, ``R R D D``,
    ``right, right, down``, ``['R', 'D']`` and ``Actions: U,L``. If the text
    contains a marker such as ``Actions:``, ``Moves:``, ``Answer:`` or
    ``Path:``, only the text after the last marker is parsed, so that words in
    the model's reasoning are not mistaken for moves.

    A word token that is not an alias is tried as a concatenation of aliases
    (``RRDD``, ``upup``). Tokens that still do not match are *skipped* by
    default (``on_unknown="skip"``), which tolerates filler like "then" or
    "go"; with ``on_unknown="stop"`` parsing ends at the first unknown word.
    Punctuation that is not an alias always acts as a separator. Returns an
    empty list when nothing matches; never raises for ``str`` input.

    >>> moves = {"U": "U", "UP": "U", "D": "D", "DOWN": "D", "R": "R", "RIGHT": "R"}
    >>> parse_action_list("right, right, down", moves)
    ['R', 'R', 'D']
    >>> parse_action_list("I will go: RRDU", moves)
    ['R', 'R', 'D', 'U']
    """
    if on_unknown not in ("skip", "stop"):
        raise ValueError(f"on_unknown must be 'skip' or 'stop', got {on_unknown!r}")
    if not isinstance(text, str) or not aliases:
        return []
    keys = {str(k).upper(): v for k, v in aliases.items() if str(k)}
    if not keys:
        return []
    max_len = max(len(k) for k in keys)
    markers = list(_ACTION_MARKER_RE.finditer(text))
    if markers:
        text = text[markers[-1].end() :]
    actions: list[str] = []
    for raw in _ACTION_TOKEN_RE.findall(text):
        token = raw.upper()
        if token in keys:
            actions.append(keys[token])
            continue
        if not (raw[0].isalnum() or raw[0] == "_"):
            continue  # punctuation separator
        pieces = _segment(token, keys, max_len)
        if pieces is not None:
            actions.extend(pieces)
        elif on_unknown == "stop":
            break
    return actions


# --------------------------------------------------------------------------- integer grids

# [[1, 2], [3, 4]]: rows cannot nest, which keeps the regex free of heavy backtracking.
_GRID_LITERAL_RE = re.compile(r"\[\s*\[[\d\s,]*\](?:\s*,\s*\[[\d\s,]*\])*\s*,?\s*\]")


def _grid_from_literal(text: str, size: int) -> tuple[list[list[int]], int] | None:
    """The last ``[[...], ...]`` literal of the right shape and where it ends."""
    for m in reversed(list(_GRID_LITERAL_RE.finditer(text))):
        try:
            value = ast.literal_eval(m.group(0))
        except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
            continue
        if (
            isinstance(value, list)
            and len(value) == size
            and all(isinstance(row, list) and len(row) == size for row in value)
            and all(type(x) is int for row in value for x in row)
        ):
            return [list(row) for row in value], m.end()
    return None


def _rows_from_line(line: str, size: int) -> list[list[int]] | None:
    """The grid rows written on one line (one row, or all ``size`` rows), else None."""
    tokens = re.findall(r"\d+", line)
    if len(tokens) == size:
        if 1 < size <= 9 and all(len(t) == size for t in tokens):
            return [[int(c) for c in t] for t in tokens]  # "1234 3412 2143 4321"
        return [[int(t) for t in tokens]]
    if len(tokens) == 1 and size <= 9:
        digits = tokens[0]
        if len(digits) == size:
            return [[int(c) for c in digits]]  # "123456789"
        if len(digits) == size * size:
            return [[int(c) for c in digits[r * size : (r + 1) * size]] for r in range(size)]
    return None


def parse_int_grid(text: str, size: int) -> list[list[int]] | None:
    """The last ``size`` x ``size`` grid of integers in ``text``, or ``None``.

    Rows may be written as digit runs (``1234``), separated numbers
    (``1 2 | 3 4``, ``1,2,3,4``, Markdown tables), one line holding the whole
    grid (``1234 3412 2143 4321``) or a Python/JSON literal
    ``[[1, 2], [3, 4]]``. Lines without digits (blank lines, ``---+---``
    separators, code fences) are ignored; a line with digits that is not a row
    breaks the grid. When several grids appear (puzzle, then solution), the
    last one wins. Values are not range-checked: that is the task's job.
    Raises ``ValueError`` only for a bad ``size``.

    >>> parse_int_grid("Solution:\\n12\\n21\\n", 2)
    [[1, 2], [2, 1]]
    >>> parse_int_grid("no idea", 2) is None
    True
    """
    if type(size) is not int or size < 1:
        raise ValueError(f"grid size must be a positive int, got {size!r}")
    if not isinstance(text, str):
        return None
    run: list[list[int]] = []
    best: list[list[int]] | None = None
    best_end = -1
    offset = 0
    for line in text.splitlines(keepends=True):
        offset += len(line)
        if not re.search(r"\d", line):
            continue
        rows = _rows_from_line(line, size)
        if rows is None:
            run = []
            continue
        run = rows if len(rows) > 1 else run + rows
        if len(run) >= size:
            run = run[-size:]
            best, best_end = [list(r) for r in run], offset
    literal = _grid_from_literal(text, size)
    if literal is not None and (best is None or literal[1] >= best_end):
        return literal[0]
    return best
