"""Split-Calc: a two-role arithmetic task where one role knows the operation and the other the operands.

The *analyst* sees the operation in words ("twice sum") and must write it as a formula in x and y
(`2*(x+y)`); the *calculator* sees the operands (x=7 y=3) and the analyst's formula, and must answer
the value, as a number or as arithmetic on numbers (`2*(7+3)`: the verifier computes it, as a tool
would; a character-level model cannot multiply in its head, a real LLM may answer `20`). Neither can
answer alone: the analyst never sees the numbers, the calculator never sees the words. The
single-agent baseline sees both and answers the value (number or arithmetic) directly.

Instances are (operation, x, y) triples with 1 <= x, y <= max_operand, split into train / validation
/ test by content (`teamrl.tasks.content_splits`): a held-out triple never appears in training.

Verifiers are strict (an adversary's target): a formula is one arithmetic expression over x, y,
digits, + - * and parentheses, evaluated by the small parser below (never `eval`); an answer is one
such expression without x and y. Several formulas or numbers, words, or an empty answer are
malformed: no credit, and the format penalty.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from teamrl.tasks.content_splits import check_heldout_split, content_split, resolve_split

OPERATIONS: dict[str, str] = {
    "sum": "x+y",
    "difference": "x-y",
    "product": "x*y",
    "twice sum": "2*(x+y)",
    "product plus x": "x*y+x",
    "square minus y": "x*x-y",
    "sum times y": "(x+y)*y",
    "triple x plus y": "3*x+y",
}
"""The operations' names (what the analyst sees) and their formulas (what it must write)."""

Instance = tuple[str, int, int]  # (operation name, x, y)

_TOKEN_RE = re.compile(r"\s*(\d+|[xy+\-*()])")
MAX_FORMULA_CHARS = 24


@dataclass(frozen=True)
class SplitCalcConfig:
    """Split-Calc operand range, reward magnitudes and which split 'heldout' means."""

    max_operand: int = 9
    """Operands x and y are drawn from 1..max_operand."""
    agreement_coef: float = 0.5
    """Analyst's local reward: this times the share of all operand pairs where its formula's value equals
    the operation's (partial credit for a formula right on some inputs)."""
    faithful_coef: float = 0.5
    """Calculator's local reward: this when its answer is the value of the formula it was given (right
    arithmetic on the analyst's formula, whether or not that formula was right)."""
    format_penalty: float = 0.1
    """Subtracted from a malformed answer (empty, several formulas or numbers, other symbols, too long)."""
    heldout_split: str = "validation"
    """Which split the framework's held-out evaluation plays: validation (checkpoint picking) or test."""

    def __post_init__(self) -> None:
        if not 3 <= self.max_operand <= 30:
            raise ValueError(f"split_calc.max_operand must be between 3 and 30, got {self.max_operand}")
        for name in ("agreement_coef", "faithful_coef", "format_penalty"):
            if getattr(self, name) < 0:
                raise ValueError(f"split_calc.{name} must be >= 0 (it is a magnitude), got {getattr(self, name)}")
        check_heldout_split("split_calc", self.heldout_split)


def evaluate_formula(text: str, x: int, y: int) -> int | None:
    """The value of a formula over x, y, integers (up to 3 digits), + - * and parentheses (usual
    precedence, a leading minus on an operand), or None when `text` is not exactly one such expression
    or is longer than 24 characters.

    >>> evaluate_formula("2*(x+y)", 3, 4), evaluate_formula("x*y+x", 2, 5), evaluate_formula("x+y,x*y", 1, 1)
    (14, 12, None)
    """
    return _evaluate(text, {"x": x, "y": y})


def answer_value(text: str) -> int | None:
    """The value of an answer: one integer or one arithmetic expression on integers (no x, y), else None.

    >>> answer_value(" 20 "), answer_value("2*(7+3)"), answer_value("-3"), answer_value("20 21"), answer_value("x+1")
    (20, 20, -3, None, None)
    """
    return _evaluate(text.strip(), {})


def _evaluate(text: str, values: dict[str, int]) -> int | None:
    text = text.strip()
    if not text or len(text) > MAX_FORMULA_CHARS:
        return None
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN_RE.match(text, position)
        if match is None:
            return None
        tokens.append(match.group(1))
        position = match.end()
    try:
        value, rest = _sum(tokens, values)
    except IndexError:  # an operator with its operand missing
        return None
    return value if value is not None and not rest else None


def _sum(tokens: list[str], values: dict[str, int]) -> tuple[int | None, list[str]]:
    value, tokens = _product(tokens, values)
    while value is not None and tokens and tokens[0] in "+-":
        op, (right, tokens) = tokens[0], _product(tokens[1:], values)
        if right is None:
            return None, tokens
        value = value + right if op == "+" else value - right
    return value, tokens


def _product(tokens: list[str], values: dict[str, int]) -> tuple[int | None, list[str]]:
    value, tokens = _atom(tokens, values)
    while value is not None and tokens and tokens[0] == "*":
        right, tokens = _atom(tokens[1:], values)
        if right is None:
            return None, tokens
        value *= right
    return value, tokens


def _atom(tokens: list[str], values: dict[str, int], signed: bool = True) -> tuple[int | None, list[str]]:
    head = tokens[0]  # IndexError on a missing operand: the caller turns it into None
    if head == "-" and signed:  # one leading minus ("-3"); "--3" is refused
        value, rest = _atom(tokens[1:], values, signed=False)
        return (None if value is None else -value), rest
    if head == "(":
        value, rest = _sum(tokens[1:], values)
        if value is None or not rest or rest[0] != ")":
            return None, rest
        return value, rest[1:]
    if head in values:
        return values[head], tokens[1:]
    if head.isdigit() and len(head) <= 3:
        return int(head), tokens[1:]
    return None, tokens


def gold_value(item: Instance) -> int:
    operation, x, y = item
    value = evaluate_formula(OPERATIONS[operation], x, y)
    assert value is not None, "the operations' formulas parse"
    return value


@lru_cache(maxsize=8)
def split_instances(config: SplitCalcConfig, split: str) -> tuple[Instance, ...]:
    """Every (operation, x, y) of a split, in a fixed shuffled order."""
    name = resolve_split(split, config.heldout_split)
    span = range(1, config.max_operand + 1)
    items = [(op, x, y) for op in OPERATIONS for x in span for y in span if content_split((op, x, y)) == name]
    random.Random(f"split_calc/{name}").shuffle(items)
    return tuple(items)


def instance(config: SplitCalcConfig, split: str, index: int) -> Instance:
    """Instance `index` of a split. Training cycles through its triples; validation and test have a fixed
    size, and an index past it is an error (a duplicate would count one instance twice)."""
    items = split_instances(config, split)
    if index < 0:
        raise ValueError(f"instance index must be >= 0, got {index}")
    name = resolve_split(split, config.heldout_split)
    if name != "train" and index >= len(items):
        raise ValueError(
            f"split_calc's {name} split has {len(items)} instances (max_operand "
            f"{config.max_operand}); evaluate at most that many (train.eval_instances) or raise "
            "task.max_operand"
        )
    return items[index % len(items)]


def analyst_terms(config: SplitCalcConfig, item: Instance, formula: str) -> dict[str, float]:
    """team: 1 when the formula equals the operation on every operand pair; local: the share of pairs where
    it does; format: the penalty when the formula does not parse."""
    span = range(1, config.max_operand + 1)
    gold = OPERATIONS[item[0]]
    if evaluate_formula(formula.strip(), 1, 1) is None:
        return {"team": 0.0, "local": 0.0, "format": -config.format_penalty}
    agree = sum(evaluate_formula(formula.strip(), x, y) == evaluate_formula(gold, x, y) for x in span for y in span)
    share = agree / len(span) ** 2
    return {"team": float(share == 1.0), "local": config.agreement_coef * share, "format": 0.0}


def calculator_terms(
    config: SplitCalcConfig, item: Instance, formula: str | None, answer: int | None
) -> dict[str, float]:
    """`answer`: the answer's value (`answer_value`). team: 1 when it is the instance's value; local: the
    faithful bonus when it is the value of the formula given (if that parses); format: the penalty for a
    malformed answer."""
    if answer is None:
        return {"team": 0.0, "local": 0.0, "format": -config.format_penalty}
    _, x, y = item
    given = evaluate_formula(formula.strip(), x, y) if formula else None
    faithful = given is not None and answer == given
    return {"team": float(answer == gold_value(item)), "local": config.faithful_coef * faithful, "format": 0.0}
