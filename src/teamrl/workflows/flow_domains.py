"""Domain adapters of the flow workflows: pose a problem, parse, grade, compare.

The four flow workflows (voting, evaluator_optimizer, orchestrator_workers, debate) are the same
on every task: they only need a problem's text, an agent's answer parsed out of its response, a
grade for an answer and a test of whether two answers agree. A `Domain` supplies those for a task:

- `MathDomain` (task `math`): problems from `math_problems` (the procedural `arithmetic:` source
  for the tiny model; GSM8K / MATH-500 / AIME for real models). An answer is the final answer of
  the text (`reasoner_answer`: `\\boxed{}`, "Answer: ...", or a last line such as `12+8=20`); for
  a numeric reference it is well formed only with a digit and one value;
  grade 1.0 when it equals the reference: integers compared exactly, anything else by
  math-verify (`answer_equals`), cached; an answer offering several values ("3 or 20", "3, 20",
  "20 \\pm 1") never equals a reference that is one value (math-verify would accept a set holding it).
- `CodeDomain` (task `code`): problems from `code_problems`. An answer is a program
  (`parse_program`); its grade is its pass ratio on the ground-truth tests, run in the sandbox
  (`CodeRunner.ground_truth`, batched and cached). An answer is correct at grade 1.0.

`flow_domain(settings, runner)` picks the domain for a task's settings object.
"""

from __future__ import annotations

import ast
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

from teamrl.tasks.code_blocks import parse_python
from teamrl.tasks.math_answers import answer_equals
from teamrl.tasks.math_echo import echo_refusal
from teamrl.tasks.math_shape import answer_refusal
from teamrl.workflows.code_parsing import parse_program, visible_prompt
from teamrl.workflows.code_runner import CodeRunner
from teamrl.workflows.code_sources import CodeProblemSource, code_problems
from teamrl.workflows.code_team import CodeTaskConfig
from teamrl.workflows.math_team import MAX_ANSWER_CHARS, MathTaskConfig, ProblemSplits, reasoner_answer, task_problems

SHOWN_CHARS = 400  # how much of one agent's output another agent is shown
_INTEGER_RE = re.compile(r"^-?\d{1,30}$")
_NUMERIC_RE = re.compile(r"-?\d{1,30}(?:\.\d{1,30})?$")


@dataclass(frozen=True)
class Answer:
    """One agent's answer, parsed from its response."""

    value: str | None
    """What is graded and compared: a math final answer or a program; None when nothing parsed."""
    well_formed: bool
    """The response had the expected form (an explicit final answer; a program defining the entry point)."""
    shown: str
    """The answer as other agents are shown it."""


class Domain(Protocol):
    """What a flow workflow needs from a task."""

    default_turns: int
    """Refinement cap of evaluator-optimizer when the caller gives none (3 for math, 2 for code)."""
    answer_instruction: str
    """How a real LLM should present its answer (chat prompts)."""

    def problem(self, split: str, index: int) -> Any:
        """Instance `index` of `split` ('train' or 'heldout')."""

    def question(self, problem: Any, prompt_style: str) -> str:
        """The problem as the agents see it (compact: short text for the tiny model)."""

    def parse(self, text: str, problem: Any) -> Answer:
        """The answer in a response; never raises on malformed text."""

    def grade(self, problems: list[Any], answers: list[Answer]) -> list[float]:
        """Each answer's score in [0, 1] (1.0 = correct); a missing answer scores 0."""

    def same(self, a: Answer, b: Answer) -> bool:
        """Whether two answers agree (for majority votes); missing answers agree with nothing."""

    def close(self) -> None:
        """Release workers (sandbox processes)."""


class MathDomain:
    """Math word problems and procedural arithmetic; answers graded against the reference."""

    default_turns = 3
    answer_instruction = "End with your final answer as \\boxed{ANSWER}."

    def __init__(self, problems: MathTaskConfig | ProblemSplits, match_timeout_s: float = 1.0) -> None:
        """`problems`: the task's settings (their `source`) or ready problem splits."""
        self.answer_form = "auto"
        if isinstance(problems, MathTaskConfig):
            self.answer_form = problems.answer_form
            problems = task_problems(problems)
        self.problems = problems
        self.match_timeout_s = match_timeout_s
        # K candidates often repeat an answer: math-verify is asked once per (answer, other).
        self._cache: OrderedDict[tuple[str, str], bool] = OrderedDict()

    def problem(self, split: str, index: int) -> Any:
        return self.problems.get(split, index)

    def question(self, problem: Any, prompt_style: str) -> str:
        return problem.question

    def parse(self, text: str, problem: Any) -> Answer:
        value, well_formed = reasoner_answer(text if isinstance(text, str) else "")
        if value is not None and _NUMERIC_RE.match(str(problem.answer).strip()):
            # A numeric question's answer has a digit and is one value: "Answer: banana" or
            # "Answer: 3 or 20" is not the form asked for, whatever its grade (the math verifier's
            # shape rules decide what "one value" is).
            well_formed = (
                well_formed and any(ch.isdigit() for ch in value) and answer_refusal(value, str(problem.answer)) is None
            )
        return Answer(value, well_formed, value if value is not None else "?")

    def grade(self, problems: list[Any], answers: list[Answer]) -> list[float]:
        # An answer that hands the question back is not graded (teamrl.tasks.math_echo).
        return [
            float(
                a.value is not None
                and echo_refusal(a.value, p.question, p.answer, p.source, self.answer_form) is None
                and self._equal(a.value, p.answer)
            )
            for p, a in zip(problems, answers)
        ]

    def same(self, a: Answer, b: Answer) -> bool:
        return a.value is not None and b.value is not None and self._equal(a.value, b.value)

    def _equal(self, answer: str, truth: str) -> bool:
        answer, truth = answer.strip()[:MAX_ANSWER_CHARS], truth.strip()
        if answer == truth:
            return True
        if _INTEGER_RE.match(answer) and _INTEGER_RE.match(truth):
            return int(answer) == int(truth)  # arithmetic and most GSM8K answers: no math-verify call
        key = (answer, truth)
        if key not in self._cache:
            try:
                self._cache[key] = answer_equals(answer, truth, timeout_seconds=self.match_timeout_s)
            except ValueError:  # an empty or unparseable other answer
                self._cache[key] = False
            while len(self._cache) > 50_000:
                self._cache.popitem(last=False)
        return self._cache[key]

    def close(self) -> None:
        pass


class CodeDomain:
    """Function-level code problems; a program's grade is its ground-truth pass ratio."""

    default_turns = 2
    answer_instruction = "Give the complete function in one ```python block."

    def __init__(self, problems: CodeTaskConfig | CodeProblemSource, runner: CodeRunner | None = None) -> None:
        """`problems`: the task's settings (their `source`) or a ready problem source."""
        if isinstance(problems, CodeTaskConfig):
            problems = code_problems(problems.source, problems.seed, problems.data_dir)
        self.problems = problems
        self.runner = runner if isinstance(runner, CodeRunner) else CodeRunner()

    def problem(self, split: str, index: int) -> Any:
        problem = self.problems.get(split, index)
        if not problem.tests:
            raise ValueError(
                f"{problem.id}: the flow workflows need function-level ground-truth tests "
                "(stdin/stdout problems are not supported)"
            )
        return problem

    def question(self, problem: Any, prompt_style: str) -> str:
        if prompt_style == "compact" and problem.metadata.get("short"):
            return problem.metadata["short"]
        return visible_prompt(problem).strip()

    def parse(self, text: str, problem: Any) -> Answer:
        program, well_formed = parse_program(text, problem)
        return Answer(program or None, well_formed, program.strip()[-SHOWN_CHARS:] if program else "(no program)")

    def grade(self, problems: list[Any], answers: list[Answer]) -> list[float]:
        jobs = [(a.value, p) for p, a in zip(problems, answers) if a.value]
        graded = iter(self.runner.ground_truth(jobs))
        return [next(graded)[0] if a.value else 0.0 for a in answers]

    def same(self, a: Answer, b: Answer) -> bool:
        return a.value is not None and b.value is not None and _normal_program(a.value) == _normal_program(b.value)

    def close(self) -> None:
        self.runner.close()


def _normal_program(program: str) -> str:
    """A program's syntax tree without formatting and comments (the text when it does not parse)."""
    try:
        return ast.dump(parse_python(program))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return program.strip()


def flow_domain(settings: Any, runner: Any = None) -> Domain:
    """The domain of a task's settings: math (`MathTaskConfig`) or code (`CodeTaskConfig`).

    `runner` is the code task's sandbox runner (a `CodeRunner`); the math domain runs no programs
    and ignores it (the warm-up passes an in-process runner meant for scripted tool programs).
    """
    if isinstance(settings, MathTaskConfig):
        return MathDomain(settings)
    if isinstance(settings, CodeTaskConfig):
        return CodeDomain(settings, runner)
    raise ValueError(
        f"the flow workflows run on the math and code tasks; got settings of type {type(settings).__name__}"
    )
