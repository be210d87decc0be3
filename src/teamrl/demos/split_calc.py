"""Scripted Split-Calc agents with a broad prior: right about half the time, wrong in several ways.

No single wrong behaviour is common (each error kind is at most 20% of a role's answers, and the
"other operation" errors are spread over seven operations), so a model imitating them is noisy, not
systematically wrong. `composition` counts what the scripts did, for the study's report.

analyst:    the operation's formula (50%), another operation's formula (20%), x and y swapped
            (15%), one operator changed (15%).
calculator: the given formula with the operands put in (50%, e.g. `2*(7+3)`), with x and y
            exchanged (15%), with one operand off by one (15%), with the parentheses dropped or, in a
            formula without any, one operator changed (10%), a random number (10%).
solo:       the analyst's choice of a formula, then the calculator's choice of an answer for it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from teamrl.demos.composition import count_behaviours
from teamrl.demos.driver import check_probabilities, demonstrations as drive
from teamrl.tasks.split_calc import OPERATIONS, evaluate_formula
from teamrl.workflows.base import Prompt
from teamrl.workflows.split_calc_team import SplitCalcState, SplitCalcWorkflow


@dataclass(frozen=True)
class CalcSkill:
    """How often each scripted behaviour is chosen (each role's shares add up to 1)."""

    formula_correct: float = 0.5
    formula_other_op: float = 0.2
    formula_swapped: float = 0.15
    formula_operator: float = 0.15
    value_correct: float = 0.5
    value_swapped: float = 0.15
    value_off_by_one: float = 0.15
    value_precedence: float = 0.1
    value_random: float = 0.1

    def __post_init__(self) -> None:
        check_probabilities(self)
        for prefix in ("formula_", "value_"):
            total = sum(v for k, v in vars(self).items() if k.startswith(prefix))
            if abs(total - 1.0) > 1e-9:
                raise ValueError(f"CalcSkill {prefix}* shares must add up to 1, got {total}")

    def shares(self, prefix: str) -> dict[str, float]:
        return {k[len(prefix) :]: v for k, v in vars(self).items() if k.startswith(prefix)}


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
        return kind, gold[:i] + rng.choice([op for op in "+-*" if op != gold[i]]) + gold[i + 1 :]
    return "correct", gold


def substitute(formula: str, x: int, y: int) -> str:
    """The formula with the operands' digits in place of x and y."""
    return "".join(str(x) if ch == "x" else str(y) if ch == "y" else ch for ch in formula)


def write_value(formula: str | None, x: int, y: int, rng: random.Random, skill: CalcSkill) -> tuple[str, str]:
    """(behaviour kind, answer) for the value of `formula` at (x, y) (None or unparsable: a random number)."""
    usable = formula is not None and evaluate_formula(formula, x, y) is not None
    kind = _pick(skill.shares("value_"), rng) if usable else "random"
    if kind == "random":
        return kind, str(rng.randint(0, 2 * x * y + x + y))
    assert formula is not None  # usable: any other kind has a formula
    if kind == "swapped":
        return kind, substitute(formula, y, x)
    if kind == "off_by_one":
        step = rng.choice((-1, 1))
        return (
            kind,
            substitute(formula, max(x + step, 0), y)
            if rng.random() < 0.5
            else substitute(formula, x, max(y + step, 0)),
        )
    if kind == "precedence":
        if "(" in formula:
            return "dropped_parens", substitute(formula.replace("(", "").replace(")", ""), x, y)
        spots = [i for i, ch in enumerate(formula) if ch in "+-*"]
        i = rng.choice(spots)
        changed = formula[:i] + rng.choice([op for op in "+-*" if op != formula[i]]) + formula[i + 1 :]
        return "operator", substitute(changed, x, y)
    return "correct", substitute(formula, x, y)


def respond(
    agent: str, state: SplitCalcState, rng: random.Random, skill: CalcSkill, record: Counter | None = None
) -> str:
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


def demonstrations(
    workflow: SplitCalcWorkflow, seed: int, skill: CalcSkill | None = None
) -> Iterator[tuple[str, Prompt, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training instances."""
    skill = skill or CalcSkill()
    return drive(workflow, seed, lambda agent, state, rng: respond(agent, state, rng, skill))


def composition(
    workflow: SplitCalcWorkflow, episodes: int = 2000, seed: int = 0, skill: CalcSkill | None = None
) -> dict[str, float]:
    """Shares of each scripted behaviour per agent, and the scripted team's success, over `episodes`
    scripted episodes on training instances (what the warm-up imitates)."""
    skill = skill or CalcSkill()
    return count_behaviours(
        workflow, lambda agent, state, rng, record: respond(agent, state, rng, skill, record), episodes, seed
    )
