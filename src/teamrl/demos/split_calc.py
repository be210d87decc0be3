"""Scripted Split-Calc agents with a broad prior: right about half the time, wrong in several ways.

No single wrong behaviour is common (each error kind is at most 20% of a role's answers, and the
"other operation" errors are spread over seven operations), so a model imitating them is noisy, not
systematically wrong. `composition` counts what the scripts did, for the study's report.

analyst:    the operation's formula (50%), another operation's formula (20%), x and y swapped
            (15%), one operator changed (15%).
calculator: the value of the given formula (50%), off by one (15%), off by ten (10%), evaluated
            left to right ignoring precedence (10%; off by two where that changes nothing),
            a random number (15%).
solo:       the analyst's choice of a formula, then the calculator's choice of a value for it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from teamrl.demos.composition import count_behaviours
from teamrl.demos.driver import check_probabilities, demonstrations as drive
from teamrl.tasks.split_calc import OPERATIONS, evaluate_formula
from teamrl.workflows.split_calc_team import SplitCalcState, SplitCalcWorkflow


@dataclass(frozen=True)
class CalcSkill:
    """How often each scripted behaviour is chosen (each role's shares add up to 1)."""

    formula_correct: float = 0.5
    formula_other_op: float = 0.2
    formula_swapped: float = 0.15
    formula_operator: float = 0.15
    value_correct: float = 0.5
    value_off_by_one: float = 0.15
    value_off_by_ten: float = 0.1
    value_left_to_right: float = 0.1
    value_random: float = 0.15

    def __post_init__(self) -> None:
        check_probabilities(self)
        for prefix in ("formula_", "value_"):
            total = sum(v for k, v in vars(self).items() if k.startswith(prefix))
            if abs(total - 1.0) > 1e-9:
                raise ValueError(f"CalcSkill {prefix}* shares must add up to 1, got {total}")

    def shares(self, prefix: str) -> dict[str, float]:
        return {k[len(prefix):]: v for k, v in vars(self).items() if k.startswith(prefix)}


def _pick(shares: dict[str, float], rng: random.Random) -> str:
    return rng.choices(list(shares), weights=list(shares.values()))[0]


def write_formula(operation: str, rng: random.Random, skill: CalcSkill) -> tuple[str, str]:
    """(behaviour kind, formula) for an operation's name."""
    kind = _pick(skill.shares("formula_"), rng)
    gold = OPERATIONS[operation]
    if kind == "other_op":
        return kind, rng.choice([f for name, f in OPERATIONS.items() if name != operation])
    if kind == "swapped":
        return kind, gold.translate(str.maketrans("xy", "yx"))
    if kind == "operator":
        spots = [i for i, ch in enumerate(gold) if ch in "+-*"]
        i = rng.choice(spots)
        return kind, gold[:i] + rng.choice([op for op in "+-*" if op != gold[i]]) + gold[i + 1:]
    return "correct", gold


def left_to_right(formula: str, x: int, y: int) -> int | None:
    """The formula's value with every operator applied left to right (the precedence error)."""
    flat = formula.replace("(", "").replace(")", "")
    tokens = [str({"x": x, "y": y}.get(ch, ch)) for ch in flat]
    value, op, number = None, "+", ""
    for token in tokens + ["+"]:
        if token.isdigit():
            number += token
            continue
        value = int(number) if value is None else {"+": value + int(number), "-": value - int(number),
                                                    "*": value * int(number)}[op]
        op, number = token, ""
    return value


def write_value(formula: str | None, x: int, y: int, rng: random.Random, skill: CalcSkill) -> tuple[str, str]:
    """(behaviour kind, answer) for the value of `formula` at (x, y) (None: no usable formula)."""
    value = evaluate_formula(formula or "", x, y)
    kind = "random" if value is None else _pick(skill.shares("value_"), rng)
    if kind == "off_by_one":
        return kind, str(value + rng.choice((-1, 1)))
    if kind == "off_by_ten":
        return kind, str(value + rng.choice((-10, 10)))
    if kind == "left_to_right":
        flat = left_to_right(formula, x, y)
        return kind, str(flat if flat != value else value + rng.choice((-2, 2)))
    if kind == "random":
        return kind, str(rng.randint(0, 2 * x * y + x + y))
    return "correct", str(value)


def respond(agent: str, state: SplitCalcState, rng: random.Random, skill: CalcSkill,
            record: Counter | None = None) -> str:
    """The scripted answer of `agent`; `record` (if given) counts the behaviour kinds chosen."""
    operation, x, y = state.item
    if agent == "analyst":
        kind, answer = write_formula(operation, rng, skill)
    elif agent == "calculator":
        kind, answer = write_value(state.formula, x, y, rng, skill)
    else:
        formula_kind, formula = write_formula(operation, rng, skill)
        value_kind, answer = write_value(formula, x, y, rng, skill)
        kind = f"{formula_kind}+{value_kind}"
    if record is not None:
        record[f"{agent}/{kind}"] += 1
    return answer


def demonstrations(workflow: SplitCalcWorkflow, seed: int, skill: CalcSkill | None = None
                   ) -> Iterator[tuple[str, str, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training instances."""
    skill = skill or CalcSkill()
    return drive(workflow, seed, lambda agent, state, rng: respond(agent, state, rng, skill))


def composition(workflow: SplitCalcWorkflow, episodes: int = 2000, seed: int = 0,
                skill: CalcSkill | None = None) -> dict[str, float]:
    """Shares of each scripted behaviour per agent, and the scripted team's success, over `episodes`
    scripted episodes on training instances (what the warm-up imitates)."""
    skill = skill or CalcSkill()
    return count_behaviours(workflow, lambda agent, state, rng, record: respond(agent, state, rng, skill, record),
                            episodes, seed)
