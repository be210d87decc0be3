"""Split-Calc's team (analyst -> calculator, one answer each) and its single-agent baseline.

analyst:    sees the operation's name and answers a formula in x and y, e.g. `2*(x+y)`.
calculator: sees the operands and the analyst's formula and answers the value, e.g. `2*(7+3)` or `20`.
single:     one agent sees the operation's name and the operands and answers the value.

Each candidate is scored when it is made (AT-GRPO's per-turn rewards): the analyst's team term is
whether its formula is the operation, the calculator's whether its value is the instance's, which
depends on the committed formula (see `teamrl.tasks.split_calc` for every term). The format term
(0 or minus the penalty) goes into `Outcome.local` beside the local term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from teamrl.tasks.split_calc import (Instance, SplitCalcConfig, analyst_terms, answer_value, calculator_terms,
                                     instance)
from teamrl.workflows.base import Agent, Outcome


@dataclass
class SplitCalcState:
    """One episode: the instance, the analyst's committed formula, whether the value was answered."""

    item: Instance
    formula: str | None = None
    answered: bool = False
    solved: bool = False


class SplitCalcWorkflow:
    """analyst -> calculator (sequential, one turn), or the single agent alone (`single_agent=True`)."""

    parallel = False

    def __init__(self, task: SplitCalcConfig, max_turns: int = 1, single_agent: bool = False,
                 prompt_style: str = "compact", **_: Any) -> None:
        if not isinstance(task, SplitCalcConfig):
            raise TypeError(f"SplitCalcWorkflow needs a SplitCalcConfig, got {type(task).__name__}")
        if prompt_style != "compact":
            raise ValueError("split_calc has compact prompts only (workflow.prompt_style: compact)")
        self.task = task
        self.single_agent = single_agent
        self.prompt_style = prompt_style
        self.max_turns = 1  # one answer per agent: the value ends the episode whatever max_turns says
        self.agents = [Agent("solo", "solo")] if single_agent else [Agent("analyst", "analyst"),
                                                                    Agent("calculator", "calculator")]

    def new_state(self, split: str, index: int) -> SplitCalcState:
        return SplitCalcState(instance(self.task, split, index))

    def render(self, agent: str, state: SplitCalcState) -> str:
        operation, x, y = state.item
        if agent == "analyst":
            return f"analyst\nop:{operation}\nf>"
        if agent == "calculator":
            return f"calc\nx={x} y={y}\nf:{state.formula or '?'}\n=>"
        if agent == "solo":
            return f"solo\nop:{operation}\nx={x} y={y}\n=>"
        raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(a.name for a in self.agents)}")

    def apply(self, agent: str, state: SplitCalcState, response: str) -> Outcome:
        if agent == "analyst":
            state.formula = " ".join(response.split())[:24]  # what the calculator reads, right or wrong
            return Outcome.from_terms(analyst_terms(self.task, state.item, response))
        answer = answer_value(response)
        terms = calculator_terms(self.task, state.item, state.formula, answer)
        if agent == "solo":
            terms["local"] = 0.0  # no formula was given: the faithful bonus does not apply
        state.answered, state.solved = True, terms["team"] == 1.0
        return Outcome.from_terms(terms)

    def is_done(self, state: SplitCalcState) -> bool:
        return state.answered

    def success(self, state: SplitCalcState) -> bool:
        return state.solved
