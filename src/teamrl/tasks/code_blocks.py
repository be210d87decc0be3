"""Tolerant extraction of code blocks from free-form model output.

Everything here is fed text written by language models, from large chat models to
tiny character-level policies at the start of training.  Such text is routinely
malformed: fences that never close, several blocks, code buried in prose.  The parsers therefore never raise on any ``str`` input; when
nothing usable is found they return ``None`` (or an empty list), and the caller decides
what a missing answer is worth (usually zero reward). Math answers: `teamrl.tasks.math_parsing`;
plans and grids: `teamrl.tasks.plan_parsing`.
"""

from __future__ import annotations

import ast
import html
import re
import textwrap
import warnings

__all__ = ["code_blocks", "extract_code_block", "parse_python"]

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
    # The attribute run is bounded: an unbounded `[^>]*` rescans to the end of the text from
    # every `<code` of a response without `>`, which is quadratic in the number of them.
    re.compile(r"<code(?:\s[^>]{0,200})?>(.*?)(?:</code>|\Z)", re.DOTALL | re.IGNORECASE),
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
    {"python", "bash", "sh", "shell", "text", "json", "javascript", "js", "cpp", "c", "java"} | set(_LANGUAGE_ALIASES)
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


def code_blocks(text: str, language: str | None = "python") -> list[str]:
    """Every fenced or tagged code section of `text`, best first, in the order of
    :func:`extract_code_block`'s preference (which returns the first of them).

    Fenced blocks come first: the ones tagged ``language`` (last written first), then the
    untagged ones, then the ones with another tag; ``language=None`` ranks every fenced block by
    position only. Only when there is no non-empty fenced block do ``<code>`` / ``[PYTHON]``
    sections count (the last first). Empty sections are dropped. Linear in ``len(text)``.
    Never raises for ``str`` input (anything else gives ``[]``).
    """
    if not isinstance(text, str) or not text.strip():
        return []
    want = _normalize_language(language)
    blocks = [(_normalize_language(lang), _clean_code(body)) for lang, body in _fenced_blocks(text)]
    blocks = [(lang, body) for lang, body in reversed(blocks) if body]  # the last written first
    if blocks:
        if not want:
            return [body for _, body in blocks]
        rank = {want: 0, "": 1}
        return [body for _, body in sorted(blocks, key=lambda block: rank.get(block[0], 2))]  # stable
    for tag_re in _TAG_BLOCK_RES:
        tagged = [_clean_code(html.unescape(m.group(1))) for m in tag_re.finditer(text)]
        tagged = [code for code in reversed(tagged) if code]
        if tagged:
            return tagged
    return []


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

    Never raises for ``str`` input; linear in its length (see :func:`code_blocks`).

    >>> extract_code_block("Here:\\n```python\\nprint(1)\\n```\\nDone.")
    'print(1)'
    >>> extract_code_block("```py\\nx = 1\\n")  # unclosed fence
    'x = 1'
    >>> extract_code_block("Sorry, I can't help with that.") is None
    True
    """
    found = code_blocks(text, language)
    if found:
        return found[0]
    if isinstance(text, str) and _normalize_language(language) == "python":
        stripped = text.strip()
        if stripped and _parses_as_python(stripped):
            return stripped
    return None
