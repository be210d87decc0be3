"""Imperfect scripted agents of the flow workflows on procedural arithmetic, to warm up the tiny model.

Each scripted agent is wrong in a *systematic*, learnable way (random noise would average out
under greedy decoding), so the warmed-up team is mediocre and RL has something to fix:
- a solver (generator, worker, debater) writes its working as steps, `18-6=12;12+8=20`. Each
  one has a blind spot, the problems whose last digit is its number mod 3, which it gets wrong
  most of the time (`skill.blind_wrong`); elsewhere it errs less (`skill.base_wrong`). Its error
  is to evaluate right to left (`6+8=14;18-14=4`) where that changes the result, else to be one
  too high in the last step. The blind spots of three solvers do not overlap, so a majority of
  them is right more often than any one;
- the aggregator picks the majority answer only some of the time (`skill.pick_majority`), else
  the largest answer, which is more often a wrong one (a slip is one too high);
- the evaluator checks that every step of the working is computed right, so it accepts a
  right-to-left evaluation (`ok`) and rejects only slips (`no`); it misreads a step now and then;
- the orchestrator proposes `l` (left to right) or `r` (right to left) per worker at random; a
  worker follows `r` literally (right wherever the order does not matter);
- the synthesizer writes the majority answer some of the time, else the largest answer;
- a debater keeps its own answer, or from round 1 on switches to the previous round's majority
  some of the time.
`demonstrations(workflow, seed)` yields endless (agent, prompt, response) triples of scripted
episodes on training instances of any of these workflows; `with_flow_demos` routes a task's
demonstrations to them for flow workflows and to the task's own scripted agents otherwise.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from teamrl.demos import driver as demo_driver
from teamrl.workflows.base import Prompt, Workflow
from teamrl.workflows.flow_common import FlowWorkflow
from teamrl.workflows.flow_domains import MathDomain

_EXPRESSION_RE = re.compile(r"^(\d+)([-+*])(\d+)(?:([-+*])(\d+))?$")
_STEP_RE = re.compile(r"(-?\d+)([-+*])(-?\d+)=(-?\d+)")
Demos = Callable[[Workflow, int], Iterator[tuple[str, Prompt, str]]]
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


@dataclass(frozen=True)
class ArithmeticSkill:
    """How often each scripted agent does the right thing."""

    blind_wrong: float = 0.8
    """Probability that a solver errs on problems of its blind spot."""
    base_wrong: float = 0.25
    """Probability that a solver errs elsewhere."""
    pick_majority: float = 0.4
    """Probability that the aggregator / synthesizer goes with the majority (else the largest answer)."""
    evaluator_slip: float = 0.1
    """Probability that the evaluator misjudges a step."""
    left_to_right: float = 0.5
    """Probability that the orchestrator proposes `l` (else `r`) for a worker."""
    debate_switch: float = 0.5
    """Probability that a debater adopts the previous round's majority answer."""


def steps(question: str, right_to_left: bool = False, slip: bool = False) -> tuple[str, int] | None:
    """(working, result) of an `a op b [op c]` question; None for any other question.

    Left to right is right for every arithmetic level (multiplication only ever comes first).
    """
    found = _EXPRESSION_RE.match(question.strip())
    if not found:
        return None
    a, op1, b, op2, c = found.groups()
    a, b = int(a), int(b)
    if op2 is None:
        value = _OPS[op1](a, b) + slip
        return f"{a}{op1}{b}={value}", value
    c = int(c)
    if right_to_left:
        inner = _OPS[op2](b, c)
        value = _OPS[op1](a, inner) + slip
        return f"{b}{op2}{c}={inner};{a}{op1}{inner}={value}", value
    inner = _OPS[op1](a, b)
    value = _OPS[op2](inner, c) + slip
    return f"{a}{op1}{b}={inner};{inner}{op2}{c}={value}", value


def blind_spot(question: str, solver: int) -> bool:
    """Whether `question` is of the kind solver `solver` is bad at: its last digit is solver mod 3
    (mod 3). A visible, arbitrary feature: each problem is the blind spot of exactly one of three
    solvers, so their errors rarely coincide."""
    question = question.strip()
    kind = int(question[-1]) if question[-1:].isdigit() else len(question)
    return kind % 3 == solver % 3


def solve(
    question: str, truth: str, solver: int, rng: random.Random, skill: ArithmeticSkill, strategy: str = ""
) -> str:
    """A scripted solver's response: right, or its systematic error."""
    if strategy == "r":  # followed literally: right wherever the order does not matter
        literal = steps(question, right_to_left=True)
        if literal is not None:
            return literal[0]
    wrong = rng.random() < (skill.blind_wrong if blind_spot(question, solver) else skill.base_wrong)
    right = steps(question)
    if right is None:  # not a bare expression (word problems): the answer, or one too many
        return str(int(truth) + 1) if wrong and re.fullmatch(r"-?\d+", truth) else truth
    if not wrong:
        return right[0]
    mistaken = steps(question, right_to_left=True)
    if mistaken is not None and mistaken[1] != right[1]:
        return mistaken[0]
    slipped = steps(question, slip=True)
    assert slipped is not None  # `question` is a bare expression: `right` above is not None
    return slipped[0]


def steps_hold(text: str) -> bool:
    """Whether every `a op b = r` step of a working is computed right (the evaluator's check)."""
    found = _STEP_RE.findall(text)
    return bool(found) and all(_OPS[op](int(a), int(b)) == int(r) for a, op, b, r in found)


def _majority(values: list[str | None]) -> int:
    """Index of the first answer of the largest group of equal answers (missing answers never win)."""
    counts = [values.count(v) if v is not None else 0 for v in values]
    return counts.index(max(counts))


def _largest(values: list[str | None]) -> int:
    """Index of the largest number among the answers (the first answer when none is a number)."""
    numbers = [int(v) if v is not None and re.fullmatch(r"-?\d{1,12}", v) else None for v in values]
    present = [n for n in numbers if n is not None]
    return numbers.index(max(present)) if present else 0


def _solver_index(agent: str) -> int:
    tail = agent.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def scripted_response(workflow: Any, agent: str, state: Any, rng: random.Random, skill: ArithmeticSkill) -> str:
    """The scripted agent's response in `state` (compact forms)."""
    role = workflow.check_agent(agent).role
    question, truth = state.problem.question, state.problem.answer
    if role == "generator":
        return solve(question, truth, _solver_index(agent), rng, skill)
    if role == "worker":
        return solve(question, truth, _solver_index(agent), rng, skill, workflow.strategy(agent, state))
    if role == "debater":
        previous = [a.value if a is not None else None for a in (state.answers.get(d) for d in workflow.debaters)]
        if state.round and rng.random() < skill.debate_switch:
            return previous[_majority(previous)] or "?"
        if state.round and agent in state.texts:
            return state.texts[agent]
        return solve(question, truth, _solver_index(agent), rng, skill)
    if role in ("aggregator", "synthesizer"):
        names = workflow.generators if role == "aggregator" else workflow.workers
        values = [a.value if a is not None else None for a in (state.answers.get(n) for n in names)]
        pick = _majority(values) if rng.random() < skill.pick_majority else _largest(values)
        return str(pick) if role == "aggregator" else (values[pick] or "?")
    if role == "evaluator":
        holds = steps_hold(state.text)
        if rng.random() < skill.evaluator_slip:
            holds = not holds
        return "ok" if holds else "no"
    if role == "orchestrator":
        return " ".join("l" if rng.random() < skill.left_to_right else "r" for _ in workflow.workers)
    raise ValueError(f"no scripted demonstrations for the {role!r} role of {type(workflow).__name__}")


def demonstrations(
    workflow: Workflow, seed: int, skill: ArithmeticSkill = ArithmeticSkill()
) -> Iterator[tuple[str, Prompt, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training instances."""
    if not isinstance(workflow, FlowWorkflow) or not isinstance(workflow.domain, MathDomain):
        raise ValueError(
            f"the scripted flow agents play the flow workflows on the math task; got "
            f"{type(workflow).__name__}" + ("" if isinstance(workflow, FlowWorkflow) else " (not a flow workflow)")
        )
    if not workflow.compact:
        raise ValueError("the scripted flow agents answer compact prompts only (workflow.prompt_style=compact)")
    return demo_driver.demonstrations(
        workflow, seed, lambda agent, state, rng: scripted_response(workflow, agent, state, rng, skill)
    )


def with_flow_demos(demos: Demos | None) -> Demos:
    """A task's demonstrations with the flow workflows' added: flow workflows get the scripted flow
    agents, every other workflow of the task gets `demos` (an error when the task has none)."""

    def combined(workflow: Workflow, seed: int) -> Iterator[tuple[str, Prompt, str]]:
        if isinstance(workflow, FlowWorkflow):
            return demonstrations(workflow, seed)
        if demos is None:
            raise ValueError(
                f"no scripted demonstrations for {type(workflow).__name__}; set policy.model to a model folder instead"
            )
        return demos(workflow, seed)

    return combined
