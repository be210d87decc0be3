"""Imperfect scripted math agents (reasoner + tool) for procedural arithmetic.

They warm up the tiny default model, which cannot add multi-digit numbers in its head but can
copy an expression into `print(...)` and copy a number. As in `plan_path_demos`, the agents are
imperfect in a *systematic* way, so that a model imitating them stays weak under greedy decoding
and RL with the verifier has something to fix:

- tool: prints the whole expression (`print(12-5+3)`) with probability `tool_correct_sum` on a
  question without `*`, `tool_correct_product` on one with `*`; otherwise it forgets the last
  term (`print(12-5)`, `print(7*8)` for `7*8+3`, `print(7)` for `7*8`), which is always wrong.
- reasoner: copies the tool's previous answer once there is one (`answer: 10`); before that (and
  alone, in the single-agent baseline) it says it needs the tool, which gives no answer.

So the untrained team is right about as often as its greedy tool copies the whole expression;
it becomes right every time once the tool learns to never drop a term.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from teamrl.demos import driver as demo_driver
from teamrl.workflows.base import Prompt
from teamrl.workflows.math_team import MathState, MathWorkflow

NO_ANSWER = "need tool"
"""The scripted reasoner's reply when it has no tool answer to copy (parses to no answer)."""


@dataclass(frozen=True)
class MathSkill:
    """How often each scripted agent does the right thing."""

    tool_correct_sum: float = 0.35
    """Probability that the tool prints the whole expression on a question without `*`."""
    tool_correct_product: float = 0.7
    """The same on a question with `*`."""
    reasoner_copy: float = 1.0
    """Probability that the reasoner copies the tool's previous answer when there is one."""

    def __post_init__(self) -> None:
        demo_driver.check_probabilities(self)


def drop_last_term(expression: str) -> str:
    """`12-5+3` -> `12-5`; `7*8` -> `7`; an expression without an operator is returned as is."""
    cut = max(expression.rfind(op, 1) for op in "+-*")
    return expression[:cut] if cut > 0 else expression


def scripted_tool(state: MathState, rng: random.Random, skill: MathSkill) -> str:
    question = state.problem.question
    p = skill.tool_correct_product if "*" in question else skill.tool_correct_sum
    return f"print({question if rng.random() < p else drop_last_term(question)})"


def scripted_reasoner(state: MathState, rng: random.Random, skill: MathSkill) -> str:
    tool_answer = state.answers.get("tool") if state.turn else None
    if tool_answer is not None and rng.random() < skill.reasoner_copy:
        return f"answer: {tool_answer}"
    return NO_ANSWER


def responder(skill: MathSkill) -> demo_driver.Respond:
    """The scripted team as one `respond(agent, state, rng)` function."""
    return demo_driver.scripted_team({"tool": scripted_tool, "reasoner": scripted_reasoner}, skill)


def demonstrations(workflow: MathWorkflow, seed: int, skill: MathSkill) -> Iterator[tuple[str, Prompt, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training problems."""
    return demo_driver.demonstrations(workflow, seed, responder(skill))
