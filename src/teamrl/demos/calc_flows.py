"""Scripted agents of the study workflows on Split-Calc content (task `calc_flows`): a broad prior.

No wrong behaviour is a majority of any role's answers, so the warmed-up model is noisy, not
systematically wrong (issue 12's rule), and RL's job is to make reliable what it does sometimes:
- an answerer (generator, debater in round 0, the evaluator-optimizer's generator on every turn)
  answers like Split-Calc's single agent (`teamrl.demos.split_calc`): a formula for the operation
  (right half the time; else another operation's, x and y swapped, or one operator changed), then the
  operands put in (right half the time; else exchanged, one off by one, parentheses dropped or a
  random number). Right about a quarter of the time, wrong in many different ways;
- the aggregator picks the majority answer (by value) with probability `pick_majority`, otherwise a
  candidate at random;
- the evaluator gives the right verdict (`ok` on a correct answer, `no` on a wrong one) with
  probability `evaluator_right`, else the other one;
- the orchestrator writes one formula per worker, each as Split-Calc's analyst would (right half the
  time); a worker puts the operands into its formula as Split-Calc's calculator would (right half the
  time); the synthesizer copies the majority answer with probability `pick_majority`, else a random
  worker's;
- a debater from round 1 on switches to the previous round's majority answer with probability
  `debate_switch`, else keeps its own.
`composition(workflow)` counts what the scripts chose, per agent, and the scripted team's success.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from teamrl.demos.composition import count_behaviours
from teamrl.demos.driver import check_probabilities, demonstrations as drive
from teamrl.demos.split_calc import CalcSkill, write_formula, write_value
from teamrl.tasks.split_calc import OPERATIONS
from teamrl.tasks.split_calc import gold_value
from teamrl.workflows.base import Prompt, Workflow
from teamrl.workflows.calc_flows import CalcDomain, parse_answer
from teamrl.workflows.flow_common import FlowWorkflow


@dataclass(frozen=True)
class FlowSkill:
    """How often each scripted role does the right thing (answerers: `answer`, Split-Calc's shares)."""

    pick_majority: float = 0.5
    """Probability that the aggregator / synthesizer takes the majority answer (else a random candidate)."""
    evaluator_right: float = 0.6
    """Probability that the evaluator's verdict is the right one."""
    debate_switch: float = 0.5
    """Probability that a debater adopts the previous round's majority answer (from round 1 on)."""
    answer: CalcSkill = CalcSkill()
    """How an answerer writes its formula and puts the operands in (Split-Calc's scripted shares)."""

    def __post_init__(self) -> None:
        for name in ("pick_majority", "evaluator_right", "debate_switch"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"FlowSkill.{name} must be a probability in [0, 1], got {value}")
        check_probabilities(self.answer)


def answer(item: tuple[str, int, int], rng: random.Random, skill: FlowSkill) -> tuple[str, str]:
    """(behaviour kind, answer) of a scripted answerer: a formula, then the operands put in."""
    operation, x, y = item
    formula_kind, formula = write_formula(operation, rng, skill.answer)
    value_kind, text = write_value(formula, x, y, rng, skill.answer)
    right = parse_answer(text).value == str(gold_value(item))
    return ("right" if right else f"{formula_kind}+{value_kind}"), text


def _majority(values: list[str | None]) -> int:
    """Index of the first answer of the largest group of equal values (missing values never win)."""
    counts = [values.count(v) if v is not None else 0 for v in values]
    return counts.index(max(counts))


def respond(
    workflow: Any, agent: str, state: Any, rng: random.Random, skill: FlowSkill, record: Counter | None = None
) -> str:
    """The scripted response of `agent` in `state` (compact form); `record` counts behaviour kinds."""
    role = workflow.check_agent(agent).role
    item = state.problem
    if role in ("aggregator", "synthesizer"):
        names = workflow.generators if role == "aggregator" else workflow.workers
        values = [a.value if a is not None else None for a in (state.answers.get(n) for n in names)]
        majority = rng.random() < skill.pick_majority
        pick = _majority(values) if majority else rng.randrange(len(values))
        kind = ("majority" if majority else "random") + (
            "/right" if values[pick] == str(gold_value(item)) else "/wrong"
        )
        text = str(pick) if role == "aggregator" else state.texts.get(names[pick], "?")
    elif role == "orchestrator":
        formulas = [write_formula(item[0], rng, skill.answer)[1] for _ in workflow.workers]
        right = sum(f == OPERATIONS[item[0]] for f in formulas)
        kind, text = f"{right}_right", " ".join(formulas)
    elif role == "worker":
        kind, text = write_value(workflow.strategy(agent, state), item[1], item[2], rng, skill.answer)
        right = parse_answer(text).value == str(gold_value(item))
        kind = "right" if right else ("faithful" if kind == "correct" else kind)  # right arithmetic, wrong formula
    elif role == "evaluator":
        truth = state.score >= 1.0
        right = rng.random() < skill.evaluator_right
        text = "ok" if truth == right else "no"
        kind = "right" if right else "wrong"
    elif role == "debater" and state.round:
        previous = [a.value if a is not None else None for a in (state.answers.get(d) for d in workflow.debaters)]
        if rng.random() < skill.debate_switch:
            kind, text = "switch", state.texts[workflow.debaters[_majority(previous)]]
        else:
            kind, text = "keep", state.texts.get(agent, "?")
        kind += "/right" if parse_answer(text).value == str(gold_value(item)) else "/wrong"
    elif role in ("generator", "debater"):
        kind, text = answer(item, rng, skill)
    else:
        raise ValueError(f"no scripted calc_flows agent for the {role!r} role of {type(workflow).__name__}")
    if record is not None:
        record[f"{agent}/{kind}"] += 1
    return text


def _check(workflow: Workflow) -> None:
    if not isinstance(workflow, FlowWorkflow) or not isinstance(workflow.domain, CalcDomain):
        raise ValueError(
            f"the scripted calc_flows agents play the study workflows on task calc_flows; got {type(workflow).__name__}"
        )


def demonstrations(workflow: Workflow, seed: int, skill: FlowSkill | None = None) -> Iterator[tuple[str, Prompt, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training instances."""
    _check(workflow)
    skill = skill or FlowSkill()
    return drive(workflow, seed, lambda agent, state, rng: respond(workflow, agent, state, rng, skill))


def composition(
    workflow: Workflow, episodes: int = 2000, seed: int = 0, skill: FlowSkill | None = None
) -> dict[str, float]:
    """Shares of each scripted behaviour per agent ('<agent>/<kind>') and 'team/success', over `episodes`
    scripted episodes on training instances (what the warm-up imitates)."""
    _check(workflow)
    skill = skill or FlowSkill()
    return count_behaviours(
        workflow, lambda agent, state, rng, record: respond(workflow, agent, state, rng, skill, record), episodes, seed
    )
