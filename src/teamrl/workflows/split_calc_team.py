"""Split-Calc's team (analyst -> calculator, one answer each) and its single-agent baseline.

analyst:    sees the operation's name and answers a formula in x and y, e.g. `2*(x+y)`.
calculator: sees the operands and the analyst's formula and answers the value, e.g. `2*(7+3)` or `20`.
single:     one agent sees the operation's name and the operands and answers the value.

Prompts: `compact` (the tiny character model's, e.g. `analyst\nop:sum\nf>`) or `chat` (a real LLM's:
an instruction and two worked examples as earlier chat turns, `teamrl.workflows.chat_shots`), each
asking for exactly what the verifier reads: a bare formula, a bare value.

Each candidate is scored when it is made (AT-GRPO's per-turn rewards): the analyst's team term is
whether its formula is the operation, the calculator's whether its value is the instance's, which
depends on the committed formula (see `teamrl.tasks.split_calc` for every term). The format term
(0 or minus the penalty) goes into `Outcome.local` beside the local term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from teamrl.tasks.split_calc import Instance, SplitCalcConfig, analyst_terms, answer_value, calculator_terms, instance
from teamrl.workflows.base import Agent, Outcome, Workflow
from teamrl.workflows.chat_shots import Example, few_shot

# Short and concrete for a 135M instruct model; "(of x and y)" after the operation's name is what made
# SmolLM2 write `x-y` for "difference" instead of `x-1`. The examples are no Split-Calc operation (they
# would hand the answer over) and show the calculator substituting, which the verifier computes.
CHAT_INSTRUCTIONS = {
    "analyst": (
        "Write the operation of x and y as a formula in x and y, using only x, y, numbers, +, -, * and "
        "parentheses. Reply with only the formula."
    ),
    "calculator": (
        "Put the values of x and y into the formula. Reply with only the formula with the numbers in "
        "place of x and y, or with its value."
    ),
    "solo": (
        "Compute the operation of x and y for the given values. Reply with only the arithmetic on the "
        "numbers, or with its value."
    ),
}
CHAT_EXAMPLES: dict[str, list[Example]] = {
    "analyst": [
        ("Operation: x minus twice y (of x and y)\nFormula:", "x-2*y"),
        ("Operation: y squared plus x (of x and y)\nFormula:", "y*y+x"),
    ],
    "calculator": [
        ("x = 4, y = 6\nFormula: x-2*y\nResult:", "4-2*6"),
        ("x = 5, y = 2\nFormula: y*y+x\nResult:", "2*2+5"),
    ],
    "solo": [
        ("Operation: x minus twice y (of x and y)\nx = 4, y = 6\nResult:", "4-2*6"),
        ("Operation: y squared plus x (of x and y)\nx = 5, y = 2\nResult:", "2*2+5"),
    ],
}


@dataclass
class SplitCalcState:
    """One episode: the instance, the analyst's committed formula, whether the value was answered."""

    item: Instance
    formula: str | None = None
    answered: bool = False
    solved: bool = False


class SplitCalcWorkflow(Workflow):
    """analyst -> calculator (sequential, one turn), or the single agent alone (`single_agent=True`)."""

    parallel = False

    def __init__(
        self,
        task: SplitCalcConfig,
        max_turns: int = 1,
        single_agent: bool = False,
        prompt_style: str = "compact",
        **_: Any,
    ) -> None:
        if not isinstance(task, SplitCalcConfig):
            raise TypeError(f"SplitCalcWorkflow needs a SplitCalcConfig, got {type(task).__name__}")
        if prompt_style not in ("compact", "chat"):
            raise ValueError(f"prompt_style must be 'compact' or 'chat', got {prompt_style!r}")
        self.task = task
        self.single_agent = single_agent
        self.prompt_style = prompt_style
        self.max_turns = 1  # one answer per agent: the value ends the episode whatever max_turns says
        self.agents = (
            [Agent("solo", "solo")]
            if single_agent
            else [Agent("analyst", "analyst"), Agent("calculator", "calculator")]
        )

    def new_state(self, split: str, index: int) -> SplitCalcState:
        return SplitCalcState(instance(self.task, split, index))

    def render(self, agent: str, state: SplitCalcState) -> str | list[dict[str, str]]:
        if self.prompt_style == "chat":
            return self.render_chat(agent, state)
        operation, x, y = state.item
        if agent == "analyst":
            return f"analyst\nop:{operation}\nf>"
        if agent == "calculator":
            return f"calc\nx={x} y={y}\nf:{state.formula or '?'}\n=>"
        if agent == "solo":
            return f"solo\nop:{operation}\nx={x} y={y}\n=>"
        raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(a.name for a in self.agents)}")

    def render_chat(self, agent: str, state: SplitCalcState) -> list[dict[str, str]]:
        """A real LLM's prompt: instruction, examples, then what this role sees (the split of the compact prompts)."""
        operation, x, y = state.item
        if agent == "analyst":
            question = f"Operation: {operation} (of x and y)\nFormula:"
        elif agent == "calculator":
            question = f"x = {x}, y = {y}\nFormula: {state.formula or '(none given)'}\nResult:"
        elif agent == "solo":
            question = f"Operation: {operation} (of x and y)\nx = {x}, y = {y}\nResult:"
        else:
            raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(a.name for a in self.agents)}")
        return few_shot(CHAT_INSTRUCTIONS[agent], CHAT_EXAMPLES[agent], question)

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
