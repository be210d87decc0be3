"""Tolerant extraction of plans (move lists) and integer grids from free-form model output.

Everything here is fed text written by language models, from large chat models to
tiny character-level policies at the start of training.  Such text is routinely
malformed: moves buried in prose, several candidate plans, grids with stray separators.  The parsers therefore never raise on any ``str`` input; when
nothing usable is found they return ``None`` (or an empty list), and the caller decides
what a missing answer is worth (usually zero reward). Math answers: `teamrl.tasks.math_parsing`;
code blocks: `teamrl.tasks.code_blocks`.
"""

from __future__ import annotations

import ast
import re
from typing import Literal

__all__ = ["int_grids", "parse_action_list", "parse_int_grid", "parse_plan"]

# --------------------------------------------------------------------------- action lists

# Where an explicit answer starts; only the text after the last marker is parsed. The word and the
# separator are one atomic unit followed by a possessive run of spaces, so a long run of spaces
# after a marker word that has no ':' costs one pass, not one pass per space.
_ACTION_MARKER_RE = re.compile(r"\b(?:actions?|moves?|answer|solution|path)\s*+[:=]", re.IGNORECASE)
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


def _alias_keys(aliases: dict[str, str]) -> tuple[dict[str, str], int]:
    """Upper-cased alias spellings and the longest one's length (0 when there are none)."""
    keys = {str(k).upper(): v for k, v in aliases.items() if str(k)}
    return keys, max((len(k) for k in keys), default=0)


def parse_action_list(
    text: str,
    aliases: dict[str, str],
    on_unknown: Literal["skip", "stop"] = "skip",
) -> list[str]:
    """Parse a sequence of moves into canonical action symbols (lenient: see `parse_plan` for a verifier).

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

    Skipping makes this parser unfit to *reward* a plan: "RRDD or DDRR" reads as eight moves.
    The workflows use `parse_plan`, which refuses such text.

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
    keys, max_len = _alias_keys(aliases)
    if not keys:
        return []
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


# A label word that marks a line as the answer ("Moves: RRDD", "Final answer: R R D D").
_PLAN_LABEL_RE = re.compile(r"\b(?:actions?|moves?|answer|solution|path|plan)\b", re.IGNORECASE)
# Punctuation allowed between moves. Not '/', '|', '?' or words such as "or": "R/D", "RR | DD"
# and "RRDD or DDRR" offer alternatives, and a response offering two plans has none.
_PLAN_SEPARATORS = frozenset(" \t,;.:'\"`*[](){}->→")


def _plan_moves(segment: str, keys: dict[str, str], max_len: int) -> list[str] | None:
    """The moves of a segment made only of moves and separators; None when anything else is in it."""
    moves: list[str] = []
    for raw in _ACTION_TOKEN_RE.findall(segment):
        token = raw.upper()
        if token in keys:
            moves.append(keys[token])
        elif raw[0].isalnum() or raw[0] == "_":
            pieces = _segment(token, keys, max_len)
            if pieces is None:
                return None  # a word that is not moves: prose, a hedge, a count
            moves.extend(pieces)
        elif raw not in _PLAN_SEPARATORS:
            return None
    return moves or None


def parse_plan(text: str, aliases: dict[str, str]) -> list[str] | None:
    """The one plan (list of canonical moves) a response states, or None; a verifier's parser.

    The plan is read line by line. On each line only the text after the last ``:`` or ``=`` is
    considered ("I will go: RRDD"), and it must consist of moves (``aliases`` keys, any case, also
    run together: ``RRDD``, ``upup``) and separators (spaces, ``, ; . ' " ` * [ ] ( ) { } ->``);
    a line with any other word or sign ("or", "then", "/", "?") is prose and states no plan. A
    labelled line ("Moves:", "Answer:", "Solution:", "Path:", "Plan:", "Actions:", its value on
    the same line or the next non-blank one) outranks unlabelled lines. Fences and other prose
    lines are ignored. Exactly one plan must remain: several *different* plans (a hedge such as
    "RRDD\\nDDRR", or two labelled answers that differ) give None, the same plan repeated is
    fine. Never raises for ``str`` input; linear in ``len(text)``.

    >>> moves = {"U": "U", "D": "D", "L": "L", "R": "R", "RIGHT": "R", "DOWN": "D"}
    >>> parse_plan("Thinking...\\nMoves: right, right, down.", moves)
    ['R', 'R', 'D']
    >>> parse_plan("RRDD or DDRR", moves) is None
    True
    """
    if not isinstance(text, str) or not aliases:
        return None
    keys, max_len = _alias_keys(aliases)
    if not keys:
        return None
    labelled: list[list[str] | None] = []
    plain: list[list[str]] = []
    pending = False  # a label line whose value is on the next non-blank line
    for line in text.splitlines():
        cut = max(line.rfind(":"), line.rfind("="))
        segment = line[cut + 1 :]
        if not segment.strip(" \t`*"):
            if cut >= 0 and _PLAN_LABEL_RE.search(line, 0, cut):
                pending = True
            continue
        moves = _plan_moves(segment, keys, max_len)
        if pending or (cut >= 0 and _PLAN_LABEL_RE.search(line, 0, cut)):
            labelled.append(moves)
        elif moves:
            plain.append(moves)
        pending = False
    stated = [m for m in labelled if m] or plain
    if not stated or any(m != stated[-1] for m in stated):
        return None
    return stated[-1]


# --------------------------------------------------------------------------- integer grids

# [[1, 2], [3, 4]]: rows cannot nest, and every quantifier is possessive, so a long run of spaces
# or commas costs one pass (a backtracking `\s*,?\s*` is quadratic in the run's length).
_GRID_LITERAL_RE = re.compile(r"\[\s*+\[[0-9\s,]*+\](?:\s*+,\s*+\[[0-9\s,]*+\])*+(?:\s*+,)?+\s*+\]")
_DIGIT_RE = re.compile(r"[0-9]")
_DIGITS_RE = re.compile(r"[0-9]+")
# No grid value needs more digits; longer runs are not values (and int() refuses > 4,300 digits).
_MAX_VALUE_DIGITS = 18
_LONG_DIGITS_RE = re.compile(r"[0-9]{19}")


def _grids_from_literals(text: str, size: int) -> list[tuple[int, list[list[int]]]]:
    """Every ``[[...], ...]`` literal of the right shape, with where it ends."""
    found = []
    for m in _GRID_LITERAL_RE.finditer(text):
        literal = m.group(0)
        if _LONG_DIGITS_RE.search(literal):
            continue
        try:
            value = ast.literal_eval(literal)
        except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
            continue
        if (
            isinstance(value, list)
            and len(value) == size
            and all(isinstance(row, list) and len(row) == size for row in value)
            and all(type(x) is int for row in value for x in row)
        ):
            found.append((m.end(), [list(row) for row in value]))
    return found


def _rows_from_line(line: str, size: int) -> list[list[int]] | None:
    """The grid rows written on one line (one row, or all ``size`` rows), else None."""
    tokens = _DIGITS_RE.findall(line)
    if len(tokens) == size:
        if any(len(t) > _MAX_VALUE_DIGITS for t in tokens):
            return None
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


def _grids_from_lines(text: str, size: int) -> list[tuple[int, list[list[int]]]]:
    """Grids written as rows of lines, with where each ends.

    A run of consecutive row lines (lines without digits do not interrupt it) is cut into grids of
    ``size`` rows counted back from its last row; rows left over at its start (a column header)
    are dropped. A line holding a whole grid is a grid of its own.
    """
    found: list[tuple[int, list[list[int]]]] = []
    run: list[tuple[int, list[int]]] = []  # (end offset of the row's line, row)

    def close_run() -> None:
        for stop in range(len(run), size - 1, -size):
            chunk = run[stop - size : stop]
            found.append((chunk[-1][0], [row for _, row in chunk]))
        run.clear()

    offset = 0
    for line in text.splitlines(keepends=True):
        offset += len(line)
        if not _DIGIT_RE.search(line):
            continue
        rows = _rows_from_line(line, size)
        if rows is None or len(rows) > 1:
            close_run()
            if rows is not None:
                found.append((offset, rows))
            continue
        run.append((offset, rows[0]))
    close_run()
    return found


def int_grids(text: str, size: int) -> list[list[list[int]]]:
    """Every ``size`` x ``size`` grid of integers in ``text``, in the order they end.

    The forms are those of `parse_int_grid`; a verifier uses this to see whether a response states
    more than one grid. Values longer than 18 digits are not grid values (the row or literal holding
    them is not a grid), so no integer conversion can fail. Raises ``ValueError`` only for a bad ``size``.

    >>> int_grids("Puzzle:\\n10\\n01\\nSolution:\\n12\\n21", 2)
    [[[1, 0], [0, 1]], [[1, 2], [2, 1]]]
    """
    if type(size) is not int or size < 1:
        raise ValueError(f"grid size must be a positive int, got {size!r}")
    if not isinstance(text, str):
        return []
    lines = [(end, 0, grid) for end, grid in _grids_from_lines(text, size)]
    literals = [(end, 1, grid) for end, grid in _grids_from_literals(text, size)]
    # A literal ending where a line grid ends (a printed literal, one row per line) comes last.
    return [grid for _, _, grid in sorted(lines + literals, key=lambda item: item[:2])]


def parse_int_grid(text: str, size: int) -> list[list[int]] | None:
    """The last ``size`` x ``size`` grid of integers in ``text``, or ``None``.

    Rows may be written as digit runs (``1234``), separated numbers
    (``1 2 | 3 4``, ``1,2,3,4``, Markdown tables), one line holding the whole
    grid (``1234 3412 2143 4321``) or a Python/JSON literal
    ``[[1, 2], [3, 4]]``. Lines without digits (blank lines, ``---+---``
    separators, code fences) are ignored; a line with digits that is not a row
    breaks the grid. When several grids appear (puzzle, then solution), the
    last one wins (`int_grids` lists them all). Values are not range-checked: that is the task's
    job. Raises ``ValueError`` only for a bad ``size``.

    >>> parse_int_grid("Solution:\\n12\\n21\\n", 2)
    [[1, 2], [2, 1]]
    >>> parse_int_grid("no idea", 2) is None
    True
    """
    grids = int_grids(text, size)
    return grids[-1] if grids else None
