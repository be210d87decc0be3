"""Shared machinery of the paper's tool + plan workflows on grid puzzles (Plan-Path, Sokoban, Sudoku).

tool: writes a short Python program; it runs in the sandbox with the task's helpers and the
      current state in its namespace, its printed output is parsed into an action, and the action
      is simulated on a `copy.deepcopy` of the environment (the real environment is not moved).
plan: sees the state, the tool's program, the parsed output and the simulation result, and emits
      the action that steps the real environment, or the single word `follow` to execute the tool's
      parsed proposal as it is (as on Plan-Path: a tiny model copies long action strings poorly,
      and a real LLM can copy or answer `follow` alike; whether to trust the tool is the decision
      that matters). With `single_agent=True` the plan role is alone and `follow` means nothing.

Rewards (one formula, see `Outcome`): the team term of a candidate is the environment's shaped
reward of its action on the current state (for the tool: of its proposal, on the copy); the local
term is +format_bonus for a well-formed response (a program that ran and printed an action, and a
plan, executed or simulated without an invalid step) and -format_bonus otherwise, except that
an action executed cleanly without progress (no goal, progress term <= 0: "UD", a walk that pushes
no box, consistent but wrong digits) gets 0, so that going nowhere never scores above zero. A tool
response that parses to nothing is a no-op with the negative local term; a plan that parses to
nothing forfeits the episode (`env.forfeit()`: the invalid-move penalty). A response applied after the
episode ended (the driver should not send one) changes nothing and scores zero.

Every action is verified as a whole before it counts (contract: docs/verifiers/plans.md):
- a plan with moves the environment would leave unread, after the goal or past the move budget,
  is refused: for the plan a forfeit, for the tool a proposal simulated as `invalid` (the
  invalid-move penalty, -format_bonus), so a sweep that happens to cross the goal, or two plans
  written one after the other, never scores the goal or progress;
- an action that changes nothing (a Sudoku grid equal to the current one) is refused like an empty
  one: the plan forfeits, the tool gets -format_bonus (saying nothing must not be a safe harbour);
- `follow` is the whole response (the single word, any case, optionally quoted, bold, fenced,
  ending in '.' or '!', or after "Answer:"), only in the two-agent workflow, and only for the
  proposal the tool made this turn (it is cleared once the plan role acts), re-executed on the
  real environment (never the simulated copy's state); a response that mentions `follow` and is
  not just `follow` ("follow, or RRDD") is no plan.

The plan role is told the tool proposal's simulation as one word: goal (solved the task),
invalid (hit an invalid step), missed (valid, not solved), none (the program printed no
parseable action) or error (no program found, or it failed or timed out).

A task subclass supplies the hooks: `make_env`, `observation`, `namespace`, `parse_action`,
`show_action`, and the class attributes `helpers` (source of the namespace helpers) and
`instructions` (the chat-style preambles).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from teamrl.tasks.code_blocks import extract_code_block
from teamrl.workflows.base import Agent, Outcome, Workflow
from teamrl.workflows.chat_shots import Example, few_shot
from teamrl.workflows.program_runner import ProgramRunner

# `follow`, alone: optionally after an answer label (no backtracking: one fullmatch of one line).
_FOLLOW_RE = re.compile(r"(?:(?:final\s++)?(?:answer|plan|action|decision|moves?)\s*+[:=]\s*+)?follow", re.IGNORECASE)
_FOLLOW_STRIP = " \t`*'\".!"


def is_follow(text: str) -> bool:
    """Whether a plan response is the single word `follow` (case, quotes, bold, a fence, a final '.'
    or an "Answer:" label aside); any other word or a second line with content makes it no `follow`.

    >>> is_follow("Follow."), is_follow("```\\nfollow\\n```"), is_follow("follow, or RRDD")
    (True, True, False)
    """
    if not isinstance(text, str):
        return False
    lines = [line.strip(_FOLLOW_STRIP) for line in text.splitlines()]
    lines = [line for line in lines if line and line.lower() not in ("text", "plaintext")]
    return len(lines) == 1 and _FOLLOW_RE.fullmatch(lines[0]) is not None


_FOLLOW_WORD_RE = re.compile(r"\bfollow\b", re.IGNORECASE)  # the word, not "following"


def _overran(info: dict[str, Any]) -> bool:
    """Whether an action had moves left unread after the goal or the move budget ended the episode
    (moves after an invalid one are the invalid plan's, which fails anyway)."""
    return info.get("ignored", 0) > 0 and "invalid_at" not in info


def _changed_nothing(info: dict[str, Any]) -> bool:
    """Whether an action executed nothing without an invalid step (e.g. the current Sudoku grid)."""
    return info.get("executed", 0) == 0 and "invalid_at" not in info


def _program(response: str) -> str | None:
    """The program in a tool response; None when there is none or it cannot be sent as UTF-8."""
    program = extract_code_block(response) if isinstance(response, str) else None
    if program is None:
        return None
    try:
        program.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: not a program, and the sandbox cannot take it
        return None
    return program


class Runner(Protocol):
    """Runs program sources: `run(sources) -> [(stdout, ran_ok)]` (ProgramRunner, TrustedRunner)."""

    def run(self, sources: list[str]) -> list[tuple[str, bool]]: ...


@dataclass
class ToolPlanState:
    """One episode: the real environment and what the tool said this turn."""

    env: Any
    program: str = ""
    output: str = ""
    simulation: str = ""
    proposal: Any = None  # the tool's parsed action this turn, executed by a plan of `follow`
    transcript: list[tuple[str, str]] = field(default_factory=list)


class ToolPlanWorkflow(Workflow):
    """tool -> plan, sequential; or the plan role alone (`single_agent=True`)."""

    parallel = False
    helpers: ClassVar[str] = ""
    """Python source defining the helpers of the tool's namespace."""
    instructions: ClassVar[dict[str, str]] = {}
    """Chat-style preambles by key 'tool', 'plan' (with a tool) and 'plan_single'."""

    def chat_examples(self, key: str) -> list[Example]:
        """Worked examples shown before the question in chat prompts, by the keys of `instructions`
        (`teamrl.workflows.chat_shots`: a small real model answers in the form the examples show).
        None by default; a task that defines them renders them with its own hooks, so they read as
        its questions do."""
        return []

    def __init__(
        self,
        max_turns: int = 3,
        single_agent: bool = False,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        runner: Runner | None = None,
    ) -> None:
        if prompt_style not in ("compact", "chat"):
            raise ValueError(f"prompt_style must be 'compact' or 'chat', got {prompt_style!r}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        if format_bonus < 0:
            raise ValueError(f"format_bonus must be >= 0 (it is a magnitude), got {format_bonus}")
        self.max_turns = max_turns
        self.single_agent = single_agent
        self.prompt_style = prompt_style
        self.format_bonus = format_bonus
        self.agents = [Agent("plan", "plan")] if single_agent else [Agent("tool", "tool"), Agent("plan", "plan")]
        self.runner: Runner = runner or ProgramRunner()

    # ------------------------------------------------------------------ task hooks
    def make_env(self, split: str, index: int) -> Any:
        """Instance `index` of `split`, reset and ready."""
        raise NotImplementedError(f"{type(self).__name__} must define make_env")

    def observation(self, env: Any) -> str:
        """The state as the agents see it (a few lines)."""
        raise NotImplementedError(f"{type(self).__name__} must define observation")

    def namespace(self, env: Any) -> str:
        """Python assignments of the state variables the tool's program can read."""
        raise NotImplementedError(f"{type(self).__name__} must define namespace")

    def parse_action(self, text: str, env: Any) -> Any | None:
        """The action for `env` written in `text` (a program's output or a plan), or None."""
        raise NotImplementedError(f"{type(self).__name__} must define parse_action")

    def show_action(self, action: Any) -> str:
        """A parsed action as one line, in the form the plan role is expected to write."""
        raise NotImplementedError(f"{type(self).__name__} must define show_action")

    def plan_context(self, state: ToolPlanState) -> list[str]:
        """The lines that show the plan role what the tool did this turn."""
        return [f"code:{state.program.strip()}", f"out:{state.output}", f"sim:{state.simulation}"]

    # ------------------------------------------------------------------ the protocol
    def new_state(self, split: str, index: int) -> ToolPlanState:
        return ToolPlanState(self.make_env(split, index))

    def render(self, agent: str, state: ToolPlanState) -> str | list[dict[str, str]]:
        if self.prompt_style == "chat":
            key = "plan_single" if agent == "plan" and self.single_agent else agent
            question = "\n".join(self._lines(agent, state))
            examples = self.chat_examples(key)
            if examples:
                return few_shot(self.instructions[key], examples, question)
            return f"{self.instructions[key]}\n\n{question}"
        return self.compact_render(agent, state)

    def compact_render(self, agent: str, state: ToolPlanState) -> str:
        """The compact prompt (the tiny default's; the scripted demonstrations answer these)."""
        return "\n".join([agent, *self._lines(agent, state)]) + "\n>"

    def _lines(self, agent: str, state: ToolPlanState) -> list[str]:
        """What `agent` sees: the state, and for the plan role of the team what the tool did."""
        self._check_agent(agent)
        lines = [self.observation(state.env)]
        if agent == "plan" and not self.single_agent:
            lines += self.plan_context(state)
        return lines

    def program_source(self, state: ToolPlanState, program: str) -> str:
        """The full source run for `program`: helpers, state variables, then the program."""
        return f"{self.helpers}\n{self.namespace(state.env)}\n{program}\n"

    def apply(self, agent: str, state: ToolPlanState, response: str) -> Outcome:
        return self.apply_many(agent, [state], [response])[0]

    def apply_many(self, agent: str, states: list[ToolPlanState], responses: list[str]) -> list[Outcome]:
        """Apply responses; the tool's programs run in one runner call."""
        self._check_agent(agent)
        if agent == "plan":
            return [self._apply_plan(s, r) for s, r in zip(states, responses)]
        programs = [_program(r) for r in responses]
        runnable = {i: p for i, (s, p) in enumerate(zip(states, programs)) if p is not None and not s.env.done}
        results = dict(
            zip(runnable, self.runner.run([self.program_source(states[i], program) for i, program in runnable.items()]))
        )
        return [self._apply_tool(s, p, *results.get(i, ("", False))) for i, (s, p) in enumerate(zip(states, programs))]

    def is_done(self, state: ToolPlanState) -> bool:
        return state.env.done

    def success(self, state: ToolPlanState) -> bool:
        return state.env.success

    # ------------------------------------------------------------------ internals
    def _check_agent(self, agent: str) -> None:
        names = [a.name for a in self.agents]
        if agent not in names:
            raise ValueError(f"unknown agent {agent!r}; this workflow's agents are {names}")

    def _malformed(self, **info: Any) -> Outcome:
        return Outcome(0.0, -self.format_bonus, {"format": -self.format_bonus}, info)

    def _apply_tool(self, state: ToolPlanState, program: str | None, output: str, ran: bool) -> Outcome:
        if state.env.done:
            return Outcome(0.0, 0.0, {}, {"episode_over": True})
        state.program = program or ""
        state.transcript.append(("tool", state.program))
        action = self.parse_action(output, state.env) if ran else None
        state.proposal = action
        if action is None:
            state.output = " ".join(output.split())[:64]
            state.simulation = "error" if not ran else "none"
            return self._malformed(simulation=state.simulation)
        state.output = self.show_action(action)
        trial = copy.deepcopy(state.env)
        result = trial.step(action)
        if _overran(result.info):
            state.simulation = "invalid"
            penalty = -trial.config.invalid_penalty
            return Outcome(
                penalty,
                -self.format_bonus,
                {"invalid": penalty, "format": -self.format_bonus},
                {**result.info, "simulation": "invalid", "refused": "moves past the end"},
            )
        state.simulation = self._label(trial, result.info)
        malformed = _changed_nothing(result.info) or "invalid_at" in result.info
        local = -self.format_bonus if malformed else self._local(trial, result)
        return Outcome(
            result.reward, local, {**result.terms, "format": local}, {**result.info, "simulation": state.simulation}
        )

    def _apply_plan(self, state: ToolPlanState, response: str) -> Outcome:
        text = response if isinstance(response, str) else ""
        state.transcript.append(("plan", text))
        if state.env.done:
            return Outcome(0.0, 0.0, {}, {"episode_over": True})
        follows = not self.single_agent and is_follow(text)
        if follows:
            action = state.proposal
        elif not self.single_agent and _FOLLOW_WORD_RE.search(text):
            action = None  # "follow, or RRDD": two answers, which is none
        else:
            action = self.parse_action(text, state.env)
        state.proposal = None  # a proposal is followed in the turn it was made, at most once
        refused = None
        if action is not None:
            # Judged as a whole on a copy first: the environment would stop at the goal and ignore
            # what follows, which would let a sweep or two plans in a row score the goal.
            trial = copy.deepcopy(state.env)
            info = trial.step(action).info
            if _overran(info):
                refused = "moves past the end"
            elif _changed_nothing(info):
                refused = "changes nothing"
        if action is None or refused is not None:
            # Not a free no-op: a plan role that may say nothing learns to (as on Plan-Path and here
            # on Sudoku, where the planner drifted to garbage while the tool was right).
            result = state.env.forfeit()
            return Outcome(
                result.reward,
                -self.format_bonus,
                {**result.terms, "format": -self.format_bonus},
                {"parsed": False, "outcome": "invalid"}
                if action is None
                else {"parsed": True, "outcome": "invalid", "refused": refused},
            )
        result = state.env.step(action)
        local = -self.format_bonus if "invalid_at" in result.info else self._local(state.env, result)
        return Outcome(
            result.reward,
            local,
            {**result.terms, "format": local},
            {**result.info, "outcome": self._label(state.env, result.info)},
        )

    def _local(self, env: Any, result: Any) -> float:
        """The format term of an action executed without an invalid step: +format_bonus with
        progress or the goal, 0 without (a valid "UD" is well formed but must not out-score the
        step cost)."""
        return self.format_bonus if env.success or result.terms.get("progress", 0.0) > 0 else 0.0

    @staticmethod
    def _label(env: Any, info: dict[str, Any]) -> str:
        if env.success:
            return "goal"
        return "invalid" if "invalid_at" in info else "missed"
