"""Plan-Path with the paper's two roles, and the single-agent baseline.

tool: writes a short Python program whose printed output is a proposed move list. The program runs
      in the sandbox with `grid` (list of row strings, '#' = wall), `start` and `goal` ((row, col)
      tuples) and `bfs(grid, start, goal)` (returns a move string, '' when unreachable) in its
      namespace; a real LLM can write its own search, a tiny model calls the helper but must pass
      the right arguments in the right order (literal coordinates work too).
      The proposal is simulated on a copy of the environment; the real environment is not moved.
plan: sees the grid, the tool's program, its output and the simulation result, and emits the moves
      that step the real environment, or `follow` to execute the tool's proposed moves as they are.
      (`follow` spares a tiny model from copying a long move string character by character, which
      it does poorly; a real LLM can copy or answer `follow` alike. Whether to trust the tool is
      still the planner's decision.)

Rewards (one formula, see `Outcome`): the team term of a candidate is the environment's shaped
reward of its moves on the current state (for the tool: of its proposal, simulated on a copy);
the local term is +format_bonus for a well-formed response (a program that ran and printed moves;
a plan of valid moves) and -format_bonus otherwise.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from teamrl.tasks.parsing import parse_action_list
from teamrl.tasks.plan_path import PlanPathConfig, PlanPathEnv, make_instance
from teamrl.workflows.base import Agent, Outcome
from teamrl.workflows.program_runner import ProgramRunner

TOOL_HELPERS = '''
from collections import deque
def bfs(grid, start, goal):
    """Shortest move string from start to goal (row, col), '' if none."""
    rows, cols = len(grid), len(grid[0])
    start, goal = tuple(start), tuple(goal)
    prev = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            out = []
            while prev[cell] is not None:
                cell, move = prev[cell]
                out.append(move)
            return "".join(reversed(out))
        for move, dr, dc in (("U", -1, 0), ("D", 1, 0), ("L", 0, -1), ("R", 0, 1)):
            r, c = cell[0] + dr, cell[1] + dc
            if 0 <= r < rows and 0 <= c < cols and grid[r][c] != "#" and (r, c) not in prev:
                prev[(r, c)] = (cell, move)
                queue.append((r, c))
    return ""
'''

CHAT_INSTRUCTIONS = {
    "tool": (
        "You are the tool agent of a two-agent team on a grid path-finding task. Write a short "
        "Python program in a ```python block that prints the moves from S to G as a string of "
        "U/D/L/R. The variables `grid` (list of row strings, '#' is a wall), `start` and `goal` "
        "((row, col) tuples) and the helper `bfs(grid, start, goal)` are available."
    ),
    "plan": (
        "You are the plan agent of a two-agent team on a grid path-finding task. Reply with the "
        "moves from S to G only, as a string of U/D/L/R (U = row-1, D = row+1, L = col-1, "
        "R = col+1), or with the single word follow to execute the tool agent's proposed moves. "
        "A move into '#' or off the grid ends the episode."
    ),
}


MOVE_ALIASES = {"U": "U", "D": "D", "L": "L", "R": "R",
                "UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"}


def parse_moves(text: str) -> list[str]:
    """Moves written as 'RRD', 'R R D', 'right, down' or 'Moves: U,L'; [] when there are none."""
    return parse_action_list(text, MOVE_ALIASES)


def extract_program(text: str) -> str:
    """The code of a ```python block if there is one, else the whole text."""
    if "```" in text:
        body = text.split("```", 2)[1]
        return body[len("python"):] if body.startswith("python") else body
    return text


@dataclass
class PlanPathState:
    """One episode: the real environment and what the tool said this turn."""

    env: PlanPathEnv
    program: str = ""
    output: str = ""
    simulation: str = ""
    proposal: list[str] = field(default_factory=list)  # the tool's parsed moves, for `follow`
    transcript: list[tuple[str, str]] = field(default_factory=list)


class PlanPathWorkflow:
    """tool -> plan, sequential; or the plan role alone (`single_agent=True`)."""

    parallel = False

    def __init__(
        self,
        task: PlanPathConfig,
        max_turns: int = 3,
        single_agent: bool = False,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        runner: ProgramRunner | None = None,
    ) -> None:
        if prompt_style not in ("compact", "chat"):
            raise ValueError(f"prompt_style must be 'compact' or 'chat', got {prompt_style!r}")
        self.task = task
        self.max_turns = max_turns
        self.single_agent = single_agent
        self.prompt_style = prompt_style
        self.format_bonus = format_bonus
        self.agents = [Agent("plan", "plan")] if single_agent else [
            Agent("tool", "tool"), Agent("plan", "plan")]
        self.runner = runner or ProgramRunner()

    def new_state(self, split: str, index: int) -> PlanPathState:
        return PlanPathState(make_instance(self.task, split, index))

    def observation(self, state: PlanPathState) -> str:
        env = state.env
        (r, c), (gr, gc) = env.position, env.goal
        return f"{env.render()}\nstart=({r},{c}) goal=({gr},{gc})"

    def render(self, agent: str, state: PlanPathState) -> str:
        lines = [agent, self.observation(state)]
        if agent == "plan" and not self.single_agent:
            # the proposal comes last, right before the answer, where copying it is easiest
            lines += [f"code:{state.program.strip()}", f"sim:{state.simulation}", f"out:{state.output}"]
        prompt = "\n".join(lines) + "\n>"
        if self.prompt_style == "chat":
            return f"{CHAT_INSTRUCTIONS[agent]}\n\n{prompt[len(agent) + 1:-2]}"
        return prompt

    def _program_source(self, state: PlanPathState, program: str) -> str:
        env = state.env
        return (f"{TOOL_HELPERS}\ngrid = {list(env.grid)!r}\nstart = {env.position!r}\n"
                f"goal = {env.goal!r}\n{program}\n")

    def apply_many(self, agent: str, states: list[PlanPathState], responses: list[str]) -> list[Outcome]:
        if agent == "plan":
            return [self.apply(agent, s, r) for s, r in zip(states, responses)]
        programs = [extract_program(r) for r in responses]
        results = self.runner.run([self._program_source(s, p) for s, p in zip(states, programs)])
        return [self._apply_tool(s, p, out, ok) for s, p, (out, ok) in zip(states, programs, results)]

    def apply(self, agent: str, state: PlanPathState, response: str) -> Outcome:
        if agent == "tool":
            program = extract_program(response)
            ((out, ok),) = self.runner.run([self._program_source(state, program)])
            return self._apply_tool(state, program, out, ok)
        if agent != "plan":
            raise ValueError(f"unknown agent {agent!r}; Plan-Path agents are tool and plan")
        follows = response.strip().lower().startswith("follow") and not self.single_agent
        moves = list(state.proposal) if follows else parse_moves(response)
        state.transcript.append((agent, response))
        result = state.env.step(moves) if moves else state.env.forfeit()
        if not moves:
            return Outcome(result.reward, -self.format_bonus, {**result.terms, "format": -self.format_bonus})
        local = -self.format_bonus if "invalid_at" in result.info else self.format_bonus
        return Outcome(result.reward, local, {**result.terms, "format": local}, result.info)

    def _apply_tool(self, state: PlanPathState, program: str, output: str, ran: bool) -> Outcome:
        state.program, state.output = program, output.strip()[:64]
        state.transcript.append(("tool", program))
        moves = parse_moves(output) if ran else []
        state.proposal = moves
        if not moves:
            state.simulation = "error" if not ran else "none"
            return Outcome(0.0, -self.format_bonus, {"format": -self.format_bonus})
        trial = copy.deepcopy(state.env)
        result = trial.step(moves)
        state.simulation = "goal" if trial.success else ("invalid" if trial.hit_invalid else "missed")
        return Outcome(result.reward, self.format_bonus, {**result.terms, "format": self.format_bonus})

    def is_done(self, state: PlanPathState) -> bool:
        return state.env.done

    def success(self, state: PlanPathState) -> bool:
        return state.env.success
