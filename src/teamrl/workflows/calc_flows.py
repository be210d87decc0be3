"""The study's workflows (voting, evaluator-optimizer, orchestrator-workers, debate) on Split-Calc content.

Task `calc_flows`: an instance is a Split-Calc triple (operation name, x, y), e.g. ("twice sum", 7, 3),
and every answering agent sees all of it: `twice sum x=7 y=3`. An answer is the value, written as one
number or one arithmetic expression on numbers (`2*(7+3)`), which the verifier computes (Split-Calc's
parser, never `eval`): the tiny character-level model cannot multiply in its head, and Split-Calc showed
that its warmed-up single agent solves this sometimes (18% sampled, pass@8 73%), so RL has a skill to
make reliable rather than a planted mistake to undo.

`CalcDomain` is the study workflows' `Domain` for this content, so the workflows' own code (prompts,
parsers, rewards; see `voting`, `evaluator_optimizer`, `orchestrator_workers`, `debate`) runs unchanged.
In orchestrator-workers the orchestrator's strategies are three formulas in x and y, one per worker
(`2*(x+y) x*y 2*(x+y)`: the compact form, words of one line); a worker puts the operands into its own.

    parse:  the answer's value (`teamrl.tasks.split_calc.answer_value`); well formed only when the whole
            response is one number or expression. Several values (`20 21`, `20,21`), words, x or y, an
            empty reply or more than 24 characters: no value, score 0, the format penalty.
    grade:  1.0 when the value equals the operation at (x, y), else 0.0.
    same:   two answers agree when their values are equal (`2*(7+3)` and `20`).
    shown:  other agents are shown the answer as written (`2*(7+3)`), so an aggregator or evaluator can
            check its form against the operation, which the tiny model can learn; the value alone
            (`20`) would ask it to multiply.

Prompts: `compact` (the tiny model's `twice sum x=7 y=3`) or `chat` (a real LLM's: the question in a
sentence, `Compute the twice sum of x and y for x = 7 and y = 3.`, and `answer_instruction`, which asks
for exactly what the parser reads: the arithmetic on the numbers or its value, and no words). In chat,
the roles that answer the question (generators, workers, debaters) see two worked examples first, as
earlier chat turns (`ExampleTurns`): without them SmolLM2-135M answered in sentences every time. The
aggregator and the evaluator see the same two problems with answers given and their reply to them.

Splits are Split-Calc's (by content): a validation or test triple never appears in training.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from teamrl.tasks.content_splits import check_heldout_split
from teamrl.tasks.split_calc import MAX_FORMULA_CHARS, Instance, SplitCalcConfig, answer_value, gold_value, instance
from teamrl.workflows.base import Workflow
from teamrl.workflows.chat_shots import few_shot
from teamrl.workflows.debate import DebateWorkflow
from teamrl.workflows.evaluator_optimizer import EvaluatorOptimizerWorkflow
from teamrl.workflows.flow_domains import Answer
from teamrl.workflows.orchestrator_workers import OrchestratorWorkersWorkflow
from teamrl.workflows.voting import VotingWorkflow


@dataclass(frozen=True)
class CalcFlowsConfig:
    """Settings of the `calc_flows` task (`task.<field>`)."""

    max_operand: int = 9
    """Operands x and y are drawn from 1..max_operand (Split-Calc's range; 3..30)."""
    heldout_split: str = "validation"
    """Which split the framework's held-out evaluation plays: validation (checkpoint picking) or test."""
    refine_turns: int = 2
    """Evaluator-optimizer's refinement cap when `workflow.max_turns` is not given (answer, verdict, revise)."""

    def __post_init__(self) -> None:
        if not 3 <= self.max_operand <= 30:
            raise ValueError(f"calc_flows.max_operand must be between 3 and 30, got {self.max_operand}")
        if not 1 <= self.refine_turns <= 5:
            raise ValueError(f"calc_flows.refine_turns must be between 1 and 5, got {self.refine_turns}")
        check_heldout_split("calc_flows", self.heldout_split)

    def split_calc(self) -> SplitCalcConfig:
        """The Split-Calc settings whose instances and splits this task uses."""
        return SplitCalcConfig(max_operand=self.max_operand, heldout_split=self.heldout_split)


def question(item: Instance, prompt_style: str = "compact") -> str:
    """What every answering agent sees: `twice sum x=7 y=3` (compact) or a sentence (chat).

    >>> question(("twice sum", 7, 3)), question(("twice sum", 7, 3), "chat")
    ('twice sum x=7 y=3', 'Compute the twice sum of x and y for x = 7 and y = 3.')
    """
    operation, x, y = item
    if prompt_style == "chat":
        return f"Compute the {operation} of x and y for x = {x} and y = {y}."
    return f"{operation} x={x} y={y}"


def parse_answer(text: str) -> Answer:
    """The value an agent answered, as a study `Answer`: one number or expression, else no value.

    >>> parse_answer(" 2*(7+3) "), parse_answer("20 21").value, parse_answer("twenty").value
    (Answer(value='20', well_formed=True, shown='2*(7+3)'), None, None)
    """
    text = text if isinstance(text, str) else ""
    value = answer_value(text)
    shown = " ".join(text.split())[:MAX_FORMULA_CHARS]
    if value is None:
        return Answer(None, False, shown or "?")
    return Answer(str(value), True, shown)


class CalcDomain:
    """Split-Calc triples as the study workflows' problems; answers graded by their computed value."""

    # Only chat prompts show it. The parser reads a bare value ("The answer is 20" is no answer), so the
    # instruction says so in as many words.
    answer_instruction = (
        "Reply with only the arithmetic on the numbers, like 6-2*4, or with its value, like 20. No words."
    )

    def __init__(self, settings: CalcFlowsConfig) -> None:
        if not isinstance(settings, CalcFlowsConfig):
            raise TypeError(
                f"CalcDomain needs CalcFlowsConfig settings (task.name: calc_flows), got {type(settings).__name__}"
            )
        self.settings = settings
        self.default_turns = settings.refine_turns
        self._split_calc = settings.split_calc()

    def problem(self, split: str, index: int) -> Instance:
        return instance(self._split_calc, split, index)

    def question(self, problem: Instance, prompt_style: str) -> str:
        return question(problem, prompt_style)

    def parse(self, text: str, problem: Instance) -> Answer:
        return parse_answer(text)

    def grade(self, problems: list[Instance], answers: list[Answer]) -> list[float]:
        return [float(a.value is not None and int(a.value) == gold_value(p)) for p, a in zip(problems, answers)]

    def same(self, a: Answer, b: Answer) -> bool:
        return a.value is not None and a.value == b.value

    def close(self) -> None:
        pass


CHAT_EXAMPLES: list[tuple[Instance, str]] = [
    (("x minus twice y", 9, 4), "9-2*4"),
    (("y squared plus x", 3, 7), "7*7+3"),
]
"""Worked examples of chat prompts: no Split-Calc operation (they would hand an answer over). Operands differ
within and across examples: with y = 2 in an example ("2*2+5") SmolLM2 copied `2*2` into its own answers."""
ANSWERING_ROLES = frozenset({"generator", "worker", "debater"})
"""Roles that answer the question itself: their examples are the example problems, answered."""
CHECKING_EXAMPLES: dict[str, list[tuple[tuple[str, ...], str]]] = {
    # (the answers the role is shown for CHAT_EXAMPLES[i], its reply); the right answer sits at another place
    # in each example, so that the examples do not teach one fixed index or verdict.
    "aggregator": [(("9-4", "9-2*4", "2*9-4"), "\\boxed{1}"), (("3*3+7", "7*3+3", "7*7+3"), "\\boxed{2}")],
    "evaluator": [
        (("9-4",), "\\boxed{Incorrect} Twice y is 2*4, so the answer is 9-2*4."),
        (("7*7+3",), "\\boxed{Correct} y squared is 7*7, plus x is 3."),
    ],
}
"""Roles that judge other agents' answers (voting's aggregator, the evaluator-optimizer's evaluator): each
example shows the example problem with answers already given, and the reply in the exact form the parsers
read. Without them SmolLM2-135M's aggregator copied an answer instead of its number (0% greedy on 24
instances) and its evaluator wrote prose with no verdict. The orchestrator and synthesizer have none."""
EXAMPLE_ROLES = ANSWERING_ROLES | frozenset(CHECKING_EXAMPLES)


def _shown(workflow: Any, state: Any, role: str, texts: tuple[str, ...]) -> Any:
    """`state` (a fresh example state) after the agents a checking role reads have answered `texts`."""
    answers = [workflow.domain.parse(text, state.problem) for text in texts]
    if role == "aggregator":
        for name, text, answer in zip(workflow.generators, texts, answers):
            state.answers[name], state.texts[name] = answer, text
    else:
        state.text, state.answer = texts[0], answers[0]
    return state


class ExampleTurns:
    """Mixed into a study workflow for chat prompts: a role's prompt comes after the same role's prompts on
    `CHAT_EXAMPLES` problems, each answered, as earlier chat turns (`EXAMPLE_ROLES` only)."""

    def render(self, agent: str, state: Any) -> str | list[dict[str, str]]:
        render = super().render  # type: ignore[misc]
        prompt = render(agent, state)
        role = self.check_agent(agent).role  # type: ignore[attr-defined]
        if role not in EXAMPLE_ROLES:
            return prompt
        # A fresh state of the workflow's own kind on the example problem (every study state's first field
        # is its problem): the example reads like the agent's first prompt.
        if role in ANSWERING_ROLES:
            examples = [(render(agent, type(state)(problem)), answer) for problem, answer in CHAT_EXAMPLES]
        else:
            examples = [
                (render(agent, _shown(self, type(state)(problem), role, texts)), reply)
                for (problem, _), (texts, reply) in zip(CHAT_EXAMPLES, CHECKING_EXAMPLES[role])
            ]
        return few_shot("", examples, prompt)


def _kind(cls: type) -> Callable[..., Workflow]:
    chat_cls = type(f"Chat{cls.__name__}", (ExampleTurns, cls), {"__doc__": f"{cls.__name__} with worked examples."})

    def build(
        settings: CalcFlowsConfig,
        max_turns: int | None = None,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        single_agent: bool = False,
        **_: Any,
    ) -> Workflow:
        if single_agent:
            raise ValueError(
                "calc_flows has no single-agent workflow (Split-Calc's is task split_calc, "
                "workflow.name: single); workflow.name: voting, evaluator_optimizer, orchestrator_workers or debate"
            )
        turns = {} if max_turns is None else {"max_turns": max_turns}
        kind = chat_cls if prompt_style == "chat" else cls  # compact prompts stay those of the study workflows
        return kind(CalcDomain(settings), prompt_style=prompt_style, format_bonus=format_bonus, **turns)

    build.__doc__ = f"{cls.__name__} on Split-Calc content (task calc_flows)."
    return build


CALC_FLOWS: dict[str, Callable[..., Workflow]] = {
    "voting": _kind(VotingWorkflow),
    "evaluator_optimizer": _kind(EvaluatorOptimizerWorkflow),
    "orchestrator_workers": _kind(OrchestratorWorkersWorkflow),
    "debate": _kind(DebateWorkflow),
}
"""The study workflows that `task.name: calc_flows` offers (`workflow.name`); `team` is voting."""
