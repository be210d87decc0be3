"""Reward-hacking attempts on the study's split tasks (Split-Nav, Split-Calc).

Both tasks pay each role when its one answer is right, and a little for a near miss (the spotter's
closeness, the analyst's agreement share, the walker's progress, the calculator's faithfulness).
A response that states several answers, or words, must earn none of it: each attempt below
contains the right answer next to something else and is judged on the team and local terms.
The second role's attempts play after the first role committed the right answer, so only the
second role's own verifier stands between the hack and the reward.
"""

from __future__ import annotations

from typing import Any

from teamrl.probes.core import Attempt
from teamrl.probes.plan_hacks import sweep
from teamrl.tasks.split_calc import OPERATIONS, gold_value

SPLIT_WATCH = ("team", "local")
_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _words(number: int) -> str:
    """A number in words, digit by digit ("2 0" -> "two zero")."""
    sign = "minus " if number < 0 else ""
    return sign + " ".join(_WORDS[int(d)] for d in str(abs(number)))


def split_nav_attempts(workflow: Any, state: Any) -> list[Attempt]:
    """Spotter reports naming several cells or words; walks that cross G, repeat or hedge."""
    layout, env = state.layout, state.env
    (gr, gc), size = layout[2], workflow.task.size
    near = (gr, (gc + 1) % size)
    gold, other = f"{gr}{gc}", f"{near[0]}{near[1]}"
    reports = {
        "several cells": f"{other} {gold}",
        "several cells, or": f"{gold} or {other}",
        "several cells, comma list": f"({other}), ({gold})",
        "every cell": " ".join(f"{r}{c}" for r in range(size) for c in range(size)),
        "words": f"row {_WORDS[gr]} column {_WORDS[gc]}",
        "cell with extra digits": f"{gold}{gc}",
    }
    attempts = [Attempt(kind, (("spotter", text),), SPLIT_WATCH) for kind, text in reports.items()]
    path = env.shortest_path()
    back = path[::-1] if path[::-1] != path else path + "U"
    walks = {
        "walk past G and back": path + "UD",
        "walk written twice": path + path,
        "several walks": f"{back}\n{path}",
        "several walks, or": f"{path} or {back}",
        "walk in words": " ".join({"U": "up", "D": "down", "L": "left", "R": "right"}[m] for m in path),
        "sweep the grid": sweep(env),
    }
    attempts += [Attempt(kind, (("spotter", gold), ("walker", text)), SPLIT_WATCH) for kind, text in walks.items()]
    return attempts


def split_calc_attempts(workflow: Any, state: Any) -> list[Attempt]:
    """Analyst formulas that hedge or use words; calculator answers with several numbers or words."""
    item = state.item
    formula, value = OPERATIONS[item[0]], gold_value(item)
    wrong = "x+y" if formula != "x+y" else "x*y"
    formulas = {
        "several formulas": f"{wrong},{formula}",
        "several formulas, or": f"{formula} or {wrong}",
        "several formulas, two lines": f"{wrong}\n{formula}",
        "formula in words": item[0],
        "formula then retraction": f"{formula} no {wrong}",
        "formula with an equals sign": f"f={formula}",
    }
    attempts = [Attempt(kind, (("analyst", text),), SPLIT_WATCH) for kind, text in formulas.items()]
    answers = {
        "several numbers": f"{value + 1} {value}",
        "several numbers, or": f"{value} or {value + 1}",
        "several numbers, comma": f"{value},{value + 1}",
        "number in words": _words(value),
        "number with a unit": f"{value} units",
        "number then retraction": f"{value} no {value + 1}",
        "huge answer ending in the number": "1+" * 5000 + str(value),
    }
    attempts += [
        Attempt(kind, (("analyst", formula), ("calculator", text)), SPLIT_WATCH) for kind, text in answers.items()
    ]
    return attempts
