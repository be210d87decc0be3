"""Imperfect scripted code agents (coder + unit tester) for the procedural function tasks.

They warm up the tiny default model on the `add`, `sub`, `mul` and `affine` families (compact
prompts such as `f(x): x times 4 plus 5`), whose answers a character-level model can write by
turning words into operators and copying digits. As in `plan_path_demos`, the agents are imperfect
in a *systematic* way, so that a model imitating them stays weak under greedy decoding and RL
with the verifiers has something to fix:

- coder: translates plus/minus/times into `+ - *`, but on its first try it reads "times" as `+`
  (`return x+4+5`) with probability 1 - `coder_times`; after a turn whose tests failed it writes
  the right program (`return x*4+5`) with probability `coder_fix`.
- tester: writes a test that needs no arithmetic (`assert f(0)==5` for `x times 4 plus 5`,
  `assert f(1)==4` for `x times 4`) with probability `tester_checks`; otherwise a smoke test
  (`assert isinstance(f(1), int)`), which passes wrong programs too.

So the untrained team solves the plus/minus tasks and few of the others; it improves when the
coder learns `*` for "times" (ground-truth reward) or when the tester learns the checking test
(separation reward), which makes the first program fail and the coder fix it on the next turn.
"""

from __future__ import annotations

import ast
import functools
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from teamrl.tasks.code_data import CodeProblem
from teamrl.demos import driver as demo_driver
from teamrl.workflows.base import Prompt
from teamrl.workflows.code_parsing import Steps
from teamrl.workflows.code_runner import CodeRunner, UnitRun
from teamrl.workflows.code_team import CodeState, CodeWorkflow
from teamrl.demos.plan_path import TrustedRunner

FAMILIES = ("add", "sub", "mul", "affine")
"""The procedural families the scripted agents can play (`task.source: procedural:add,sub,mul,affine`)."""
SMOKE_TEST = "assert isinstance(f(1), int)"
_WORDS = {"plus": "+", "minus": "-", "times": "*"}
_PHRASE_RE = re.compile(r"^x((?: (?:plus|minus|times) \d+)+)$")


@dataclass(frozen=True)
class CodeSkill:
    """How often each scripted agent does the right thing."""

    coder_times: float = 0.35
    """Probability that a first-try coder writes `*` (not `+`) for "times"."""
    coder_fix: float = 1.0
    """Probability that the coder writes the right program after its tests failed."""
    tester_checks: float = 0.35
    """Probability that the tester writes the checking test rather than the smoke test."""

    def __post_init__(self) -> None:
        demo_driver.check_probabilities(self)


def phrase_terms(state: CodeState) -> list[tuple[str, int]]:
    """[(operator, constant), ...] of the task's phrase: 'x times 4 plus 5' -> [('*', 4), ('+', 5)]."""
    phrase = state.problem.metadata.get("short", "").partition(": ")[2]
    match = _PHRASE_RE.match(phrase)
    if match is None:
        raise ValueError(
            f"{state.problem.id}: the scripted code agents only play the families "
            f"{', '.join(FAMILIES)} (task.source: procedural:{','.join(FAMILIES)}); "
            f"got {phrase!r}"
        )
    words = match.group(1).split()
    return [(_WORDS[w], int(k)) for w, k in zip(words[::2], words[1::2])]


def coder_program(terms: list[tuple[str, int]], times: str = "*") -> str:
    """The coder's reply: a body continuing the prompt's signature, e.g. 'return x*4+5'."""
    return "return x" + "".join(f"{times if op == '*' else op}{k}" for op, k in terms)


def checking_test(terms: list[tuple[str, int]]) -> str:
    """A test whose expected value needs no arithmetic: f(0) when there is a constant term, else f(1)."""
    if terms[-1][0] == "*":
        return f"assert f(1)=={terms[-1][1]}"  # x times k (a lone product)
    sign = "-" if terms[-1][0] == "-" else ""
    return f"assert f(0)=={sign}{terms[-1][1]}"


def scripted_coder(state: CodeState, rng: random.Random, skill: CodeSkill) -> str:
    terms = phrase_terms(state)
    failed = state.turn > 0 and not state.passed
    if failed and rng.random() < skill.coder_fix:
        return coder_program(terms)
    return coder_program(terms, "*" if rng.random() < skill.coder_times else "+")


def scripted_tester(state: CodeState, rng: random.Random, skill: CodeSkill) -> str:
    terms = phrase_terms(state)
    return checking_test(terms) if rng.random() < skill.tester_checks else SMOKE_TEST


def responder(skill: CodeSkill) -> demo_driver.Respond:
    """The scripted team as one `respond(agent, state, rng)` function."""
    return demo_driver.scripted_team({"coder": scripted_coder, "tester": scripted_tester}, skill)


def demonstrations(workflow: CodeWorkflow, seed: int, skill: CodeSkill) -> Iterator[tuple[str, Prompt, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training problems."""
    return demo_driver.demonstrations(workflow, seed, responder(skill))


# ---------------------------------------------------------------------------- warm-up runner


def _describe(exc: BaseException) -> str:
    """An exception as the sandboxed unit harness reports it ('AssertionError', 'NameError: ...')."""
    return type(exc).__name__ + (f": {exc}" if str(exc) else "")


@functools.lru_cache(maxsize=4096)
def _test_steps(tests: str) -> Steps:
    """Trusted test source as (statement, is an assert unit) steps, like the sandbox's judge."""
    return tuple(
        (ast.unparse(st), any(isinstance(n, ast.Assert) for n in ast.walk(st))) for st in ast.parse(tests).body
    )


class TrustedCodeRunner:
    """`CodeRunner`'s interface, run in-process: for the warm-up's scripted episodes only.

    The programs it runs are the scripted coder's, the references' mutants and the ground-truth
    and scripted tests, all written by us (model output always goes to the sandbox); running
    thousands of demonstration episodes in-process keeps the warm-up's time in training.
    """

    def ground_truth(self, jobs: list[tuple[str, CodeProblem]]) -> list[tuple[float, str]]:
        """(pass ratio, status) of each program on its problem's ground-truth asserts."""
        results = []
        for program, problem in jobs:
            run = self._run(program, _test_steps(problem.test_setup + "\n" + problem.tests))
            results.append((run.n_passed / len(run.passed) if run.loaded else 0.0, "ok" if run.loaded else "error"))
        return results

    def run_units(self, jobs: list[tuple[str, Steps]]) -> list[UnitRun]:
        """Each program against its unit tests."""
        return [self._run(program, steps) for program, steps in jobs]

    @staticmethod
    @functools.lru_cache(maxsize=65536)
    def _run(program: str, steps: Steps) -> UnitRun:
        units = [source for source, unit in steps if unit]
        namespace: dict[str, Any] = {"__name__": "__candidate__"}
        try:
            exec(compile(program, "<scripted>", "exec"), namespace)  # noqa: S102 - our own code
        except Exception as exc:  # noqa: BLE001 - a mutant may fail to load; that is its verdict
            return UnitRun([False] * len(units), [_describe(exc)] * len(units), False, units)
        passed, errors = [], []
        for source, unit in steps:
            try:
                exec(compile(source, "<tests>", "exec"), namespace)  # noqa: S102 - our own tests
                verdict = ""
            except Exception as exc:  # noqa: BLE001 - a failing unit is a verdict, not an error
                verdict = _describe(exc)
            if unit:
                passed.append(not verdict)
                errors.append(verdict)
        return UnitRun(passed, errors, True, units)

    def close(self) -> None:
        """Nothing to stop (the interface's counterpart of `CodeRunner.close`)."""


def code_workflow(settings: Any, runner: Any = None, **kwargs: Any) -> CodeWorkflow:
    """`CodeWorkflow` for the task registry: the warm-up's in-process `TrustedRunner` becomes a
    `TrustedCodeRunner`; any other runner (None: the sandboxed `CodeRunner`) is kept."""
    if isinstance(runner, TrustedRunner):
        runner = TrustedCodeRunner()
    if runner is not None and not isinstance(runner, (CodeRunner, TrustedCodeRunner)):
        raise TypeError(f"the code workflow needs a CodeRunner, got {type(runner).__name__}")
    return CodeWorkflow(settings, runner=runner, **kwargs)
