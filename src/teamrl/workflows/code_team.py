"""Code generation with the paper's two roles: a coder and a unit tester, in parallel.

coder:  writes the function (a complete program defining the entry point; a body that continues
        the prompt's signature, HumanEval style, is accepted too when it returns something).
tester: writes unit tests as plain top-level `assert` statements calling the entry point
        (a HumanEval-style `def check(candidate)` is accepted and unrolled).

Both agents see the task and the previous turn: the coder's program, the tester's tests and the
result of running that program against those tests. The ground-truth tests are never shown. The
episode ends when the coder's program passes all of the tester's tests (at least one), or after
`max_turns` turns. Success (held-out metric): the final program passes every ground-truth test.

Rewards (`Outcome`, trained reward = team_weight * team + local_weight * local; b = format_bonus):

    coder candidate:  team  = gt(program)            its pass ratio on the ground-truth tests
                      local = +b if the response is a program (it compiles and defines the
                              entry point or completes the prompt's signature), else -b
    tester candidate: team  = gt(team program)       the committed program's ground-truth pass
                                                     ratio (0 on the first turn): the shared term
                      local = separation + (-b if the tests do not parse with >= 1 unit,
                                            else b * max(separation, 0))

    separation = -1                          no unit found (a unit: an assert calling the entry
                                             point that cannot swallow its failure; see
                                             code_parsing.counts_as_unit)
               = -(failing units / units)    some test fails on the reference solution (< 0; the
                                             reference runs twice, the worse run counts)
               = killed / negatives          all pass on the reference (in [0, 1])

where the negatives are known-wrong programs: single-site mutants of the reference solution that
fail the ground-truth tests (at most `n_mutants` per problem; equivalent and looping mutants are
dropped) plus the team's earlier committed programs that failed the ground truth; a negative is
killed when at least one unit fails on it by a false assert or an exception. A unit that fails
only because the run hit its time limit (CPU seconds, see CodeRunner) kills nothing, and on the
reference it counts as a failure: so a test whose cost nears the limit can only lose, and the
machine's load cannot change the tester's reward through a timeout. Tests that pass every program (a smoke test such as
`assert isinstance(f(1), int)`) earn 0; asserts that never call the function, tautologies
(`f(1) == f(1)`, `... or True`) and asserts inside a catch-all `try` are no units (alone they
earn -1 - b); tests that also catch wrong code earn up to 1 + b; tests that reject the correct
solution earn less than nothing. A refused coder response is not graded (team 0). The
whole contract: docs/verifiers/code.md.

Sandboxing: ground-truth tests are trusted and graded by `Sandbox.run_tests`, whose judge process
runs them outside the program. The tester's tests are model-written, so they go through
`Sandbox.run_untrusted_tests` (`CodeRunner.run_units`): the same separate judge process, which
confines itself like a program before running them. Either way the program only answers calls
with plain values and never holds anything that marks a pass, so it cannot forge a verdict.

Problems: `code_problems("procedural:add,mul" | "humaneval" | "mbpp" | "mbpp_sanitized")`, or a
`CodeTaskConfig` config section. `single_agent=True` is the baseline: the coder alone, one turn.
"""

from __future__ import annotations

import textwrap
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from teamrl.tasks.code_data import CodeProblem
from teamrl.tasks.code_procedural import mutate_program
from teamrl.tasks.content_splits import check_heldout_split
from teamrl.workflows.base import Agent, Outcome, Workflow
from teamrl.workflows.code_parsing import Steps, parse_program, parse_tests, visible_prompt
from teamrl.workflows.code_runner import CodeRunner, UnitRun, UnitRunner
from teamrl.workflows.code_sources import CodeProblemSource, code_problems

_RERUN_STEP = ("pass", False)  # a helper step that does nothing (see CodeWorkflow._separation)


def _compact_program(state: CodeState) -> str:
    """The committed program as compact prompts show it: a body that completed the task's own
    signature is shown without that signature and docstring (the task line already says it)."""
    head = state.problem.prompt.rstrip()
    if head and state.program.startswith(head + "\n"):
        return textwrap.dedent(state.program[len(head) + 1 :]).strip()
    return state.program.strip()


def _shown_program(state: CodeState) -> str:
    """The committed program as chat prompts show it: a whole program the coder wrote is shown
    without the prompt that runs before it (parse_program puts it there, three newlines apart)."""
    head = state.problem.prompt.rstrip()
    if head and state.program.startswith(head + "\n\n\n"):
        return state.program[len(head) + 3 :].strip()
    return state.program.strip()


# ----------------------------------------------------------------------------- workflow


@dataclass(frozen=True)
class CodeTaskConfig:
    """The `task:` settings of the code team (a config's `task: {name: code, source: mbpp}`)."""

    source: str = "procedural"
    """`procedural[:families]`, humaneval, mbpp or mbpp_sanitized."""
    seed: int = 0
    """Seeds the procedural stream, the HumanEval partition and the choice of mutants."""
    n_mutants: int = 6
    """Known-wrong programs per problem that the tester is credited for catching."""
    max_units: int = 10
    """Asserts of a tester response that count; later ones are ignored."""
    data_dir: str | None = None
    """Where the dataset files are (default: $TEAMRL_DATA_DIR, else ../shared/datasets)."""
    heldout_split: str = ""
    """What 'heldout' means: '' (the whole held-out set), or 'validation' / 'test', two halves that share no
    problem (a study picks checkpoints on the first and reports the second)."""

    def __post_init__(self) -> None:
        if self.n_mutants < 0 or self.max_units < 1:
            raise ValueError(
                f"code.n_mutants must be >= 0 and code.max_units >= 1, got {self.n_mutants} and {self.max_units}"
            )
        if not self.source:
            raise ValueError("code.source is empty")
        if self.heldout_split:
            check_heldout_split("code", self.heldout_split)


CHAT_INSTRUCTIONS = {
    "coder": (
        "You are the coder of a two-agent programming team. Write the complete Python function "
        "`{entry}` in a ```python block."
    ),
    "tester": (
        "You are the unit tester of a two-agent programming team. Write unit tests for the function "
        "`{entry}` as plain `assert {entry}(...) == ...` lines in a ```python block; do not implement "
        "it. Good tests pass on a correct solution and fail on wrong ones."
    ),
}


@dataclass
class CodeState:
    """One episode: the team's committed program and tests, and how they fared."""

    problem: CodeProblem
    turn: int = 0
    program: str = ""
    program_gt: float = 0.0  # ground-truth pass ratio of `program` (never shown to the agents)
    steps: Steps = ()
    verdict: UnitRun | None = None  # `program` against `steps`
    failed_programs: list[str] = field(default_factory=list)  # committed programs that fail the ground truth
    pending: dict[str, Any] = field(default_factory=dict)
    passed: bool = False
    transcript: list[tuple[str, str]] = field(default_factory=list)


class CodeWorkflow(Workflow):
    """coder + tester, in parallel, until the coder's program passes the tester's tests."""

    parallel = True

    def __init__(
        self,
        problems: CodeProblemSource | CodeTaskConfig | str = "procedural",
        max_turns: int = 3,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        runner: UnitRunner | None = None,
        n_mutants: int = 6,
        max_units: int = 10,
        seed: int = 0,
        single_agent: bool = False,
    ) -> None:
        """`problems`: a source, a spec (see `code_problems`) or a `CodeTaskConfig` (whose seed,
        n_mutants and max_units then apply). `single_agent`: the coder alone, for one turn (with
        no tester there is no feedback)."""
        if isinstance(problems, CodeTaskConfig):
            seed, n_mutants, max_units = problems.seed, problems.n_mutants, problems.max_units
            problems = code_problems(problems.source, seed, problems.data_dir, problems.heldout_split)
        if prompt_style not in ("compact", "chat"):
            raise ValueError(f"prompt_style must be 'compact' or 'chat', got {prompt_style!r}")
        if max_turns < 1 or n_mutants < 0 or max_units < 1:
            raise ValueError(
                f"need max_turns >= 1, n_mutants >= 0, max_units >= 1; got {max_turns}, {n_mutants}, {max_units}"
            )
        self.problems = code_problems(problems, seed) if isinstance(problems, str) else problems
        self.single_agent = single_agent
        self.max_turns = 1 if single_agent else max_turns
        self.prompt_style, self.format_bonus = prompt_style, format_bonus
        self.n_mutants, self.max_units, self.seed = n_mutants, max_units, seed
        self.agents = (
            [Agent("coder", "coder")] if single_agent else [Agent("coder", "coder"), Agent("tester", "tester")]
        )
        self.runner: UnitRunner = runner or CodeRunner()
        self._mutants: OrderedDict[tuple[str, str], list[str]] = OrderedDict()

    def new_state(self, split: str, index: int) -> CodeState:
        problem = self.problems.get(split, index)
        if not problem.tests or not problem.reference_solution:
            raise ValueError(
                f"{problem.id}: CodeWorkflow needs function-level ground-truth tests and a reference "
                "solution (stdin/stdout problems and problems without a reference are not supported)"
            )
        return CodeState(problem)

    # ------------------------------------------------------------------ prompts

    def render(self, agent: str, state: CodeState) -> str:
        self._check_agent(agent)
        problem, verdict = state.problem, state.verdict
        result = verdict.summary() if verdict else ("no program" if not state.program else "no tests")
        tests = "\n".join(src for src, _ in state.steps)
        if self.prompt_style == "compact":
            lines = [agent, problem.metadata.get("short") or visible_prompt(problem).strip()]
            if state.turn:
                lines += [f"code:\n{_compact_program(state)}", f"tests:\n{tests}", f"result:{result}"]
            return "\n".join(lines) + "\n>"
        parts = [
            CHAT_INSTRUCTIONS[agent].format(entry=problem.entry_point or "the function"),
            f"Problem:\n{visible_prompt(problem).rstrip()}",
        ]
        if state.turn:
            parts += [
                f"Current code:\n```python\n{_shown_program(state)}\n```",
                f"Current unit tests:\n```python\n{tests}\n```",
                f"Running the code against the tests: {result}. Fix whichever side is wrong.",
            ]
        return "\n\n".join(parts)

    # ------------------------------------------------------------------ applying responses

    def apply(self, agent: str, state: CodeState, response: str) -> Outcome:
        return self.apply_many(agent, [state], [response])[0]

    def apply_many(self, agent: str, states: list[CodeState], responses: list[str]) -> list[Outcome]:
        """Score and record one response per state; sandbox runs are batched across states."""
        self._check_agent(agent)
        if agent == "coder":
            parsed = [parse_program(r, s.problem) for s, r in zip(states, responses)]
            # A refused response is not graded: it earns 0 whatever the ground truth would say.
            graded = iter(self.runner.ground_truth([(p, s.problem) for (p, ok), s in zip(parsed, states) if ok]))
            outcomes = []
            for state, response, (program, ok) in zip(states, responses, parsed):
                gt, status = next(graded) if ok else (0.0, "refused" if program else "empty")
                local = self.format_bonus if ok else -self.format_bonus
                outcomes.append(
                    Outcome(gt, local, {"gt_pass": gt, "format": local}, {"well_formed": ok, "status": status})
                )
                self._record("coder", state, response, (program, gt, status))
            return outcomes
        parsed_tests = [parse_tests(r, s.problem.entry_point, self.max_units) for s, r in zip(states, responses)]
        scores = self._separation(states, [steps for steps, _ in parsed_tests])
        outcomes = []
        for state, response, (steps, ok), (separation, info) in zip(states, responses, parsed_tests, scores):
            # The bonus pays for tests that catch something: tests that pass every program
            # (tautologies, smoke tests) or reject the reference earn nothing from it.
            fmt = self.format_bonus * max(separation, 0.0) if ok else -self.format_bonus
            team = state.program_gt
            outcomes.append(
                Outcome(
                    team,
                    separation + fmt,
                    {"team_program_gt_pass": team, "separation": separation, "format": fmt},
                    info,
                )
            )
            self._record("tester", state, response, steps)
        return outcomes

    def _separation(self, states: list[CodeState], all_steps: list[Steps]) -> list[tuple[float, dict[str, Any]]]:
        """The tester's separation score per candidate (see the module docstring)."""
        has_units = [any(unit for _, unit in steps) for steps in all_steps]
        mutants = self._negatives_many([s.problem for s in states])
        ref_jobs = [(s.problem.reference_solution, steps) for s, steps, u in zip(states, all_steps, has_units) if u]
        # Twice: a flaky test (random, timing) must pass the reference both times, which makes
        # noise that happens to fail some negatives a losing bet (docs/verifiers/code.md). The
        # trailing no-op step keys the second run apart in the runner's cache, so it really runs.
        reruns = [(program, steps + (_RERUN_STEP,)) for program, steps in ref_jobs]
        ref_runs = iter(zip(self.runner.run_units(ref_jobs), self.runner.run_units(reruns)))
        results: list[Any] = []
        negative_jobs: list[tuple[str, Steps]] = []
        for state, steps, usable, own_mutants in zip(states, all_steps, has_units, mutants):
            if not usable:
                results.append((-1.0, {"units": 0}))
                continue
            first, second = next(ref_runs)
            if not (first.all_passed and second.all_passed):
                units = len(first.passed)
                failing = max(units - first.n_passed, units - second.n_passed)
                results.append((-failing / units, {"units": units, "ref_failures": failing}))
                continue
            negatives = own_mutants + state.failed_programs
            results.append(negatives)  # replaced below, once the negatives have run
            negative_jobs += [(program, steps) for program in negatives]
        negative_runs = iter(self.runner.run_units(negative_jobs))
        for i, item in enumerate(results):
            if isinstance(item, list):
                # A negative the tests only made run out of time is not caught: a timeout says
                # "slow", and whether it comes depends on the limit and the machine, not on a check.
                killed = sum(next(negative_runs).caught for _ in item)
                score = killed / len(item) if item else 0.0
                units = sum(u for _, u in all_steps[i])
                results[i] = (score, {"units": units, "killed": killed, "negatives": len(item)})
        return results

    def negatives(self, problem: CodeProblem) -> list[str]:
        """Mutants of the reference that fail the ground-truth tests (cached per problem)."""
        return self._negatives_many([problem])[0]

    def _negatives_many(self, problems: list[CodeProblem]) -> list[list[str]]:
        """`negatives` of several problems; the new ones are graded in one batched sandbox call."""
        keys = [(p.id, p.reference_solution) for p in problems]
        new = list({k: p for k, p in zip(keys, problems) if k not in self._mutants}.items())
        candidates = [
            mutate_program(p.reference_solution, p.entry_point, 3 * self.n_mutants, seed=f"{self.seed}:{p.id}")
            for _, p in new
        ]
        graded = iter(self.runner.ground_truth([(m, p) for (_, p), ms in zip(new, candidates) for m in ms]))
        for (key, _), mutants in zip(new, candidates):
            # Looping mutants are wrong too, but each would cost a full timeout per tester candidate.
            verdicts = [next(graded) for _ in mutants]
            self._mutants[key] = [
                m for m, (ratio, status) in zip(mutants, verdicts) if ratio < 1.0 and status in ("ok", "error")
            ][: self.n_mutants]
        while len(self._mutants) > 10_000:
            self._mutants.popitem(last=False)
        return [self._mutants[k] for k in keys]

    def _record(self, agent: str, state: CodeState, response: str, value: Any) -> None:
        state.pending[agent] = value
        state.transcript.append((agent, response if isinstance(response, str) else ""))
        if all(a.name in state.pending for a in self.agents):
            self._close_turn(state)

    def _close_turn(self, state: CodeState) -> None:
        """Both agents have answered: commit, and check the new program against the new tests."""
        (state.program, state.program_gt, status), state.steps = state.pending["coder"], state.pending.get("tester", ())
        state.pending = {}
        state.turn += 1
        state.verdict = None
        if state.program and any(unit for _, unit in state.steps):
            state.verdict = self.runner.run_units([(state.program, state.steps)])[0]
        state.passed = state.verdict is not None and state.verdict.all_passed
        # A program that loops would cost a full timeout per tester candidate: not a negative.
        known_wrong = state.program_gt < 1.0 and status in ("ok", "error")
        if state.program and known_wrong and state.program not in state.failed_programs:
            state.failed_programs = (state.failed_programs + [state.program])[-3:]

    # ------------------------------------------------------------------ end of episode

    def is_done(self, state: CodeState) -> bool:
        return state.passed or state.turn >= self.max_turns

    def success(self, state: CodeState) -> bool:
        return state.program_gt >= 1.0

    def _check_agent(self, agent: str) -> None:
        names = [a.name for a in self.agents]
        if agent not in names:
            raise ValueError(f"unknown agent {agent!r}; this code workflow's agents are {' and '.join(names)}")

    def close(self) -> None:
        """Stop the sandbox workers."""
        self.runner.close()
