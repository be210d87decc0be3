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

Rewards: see `teamrl.workflows.tool_plan` (the shared tool + plan machinery of Plan-Path, Sokoban
and Sudoku); the team term is `PlanPathEnv.step`'s shaped reward.
"""

from __future__ import annotations

from teamrl.tasks.code_blocks import extract_code_block
from teamrl.tasks.plan_parsing import parse_plan
from teamrl.tasks.plan_path import PlanPathConfig, PlanPathEnv, make_instance
from teamrl.workflows.chat_shots import Example
from teamrl.workflows.tool_plan import Runner, ToolPlanState, ToolPlanWorkflow

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
    "plan_single": (
        "Grid path-finding task. Reply with the moves from S to G only, as a string of U/D/L/R "
        "(U = row-1, D = row+1, L = col-1, R = col+1). A move into '#' or off the grid ends the episode."
    ),
}


# Worked examples of the chat prompts (task.worked_examples): 4x4 grids written by hand (an instance of the default 6x6 task is
# never one of them), each rendered by the workflow's own hooks so it reads as a question does.
EXAMPLE_GRIDS: tuple[tuple[tuple[str, ...], tuple[int, int], tuple[int, int]], ...] = (
    (("....", ".##.", "...#", "#..."), (0, 0), (3, 3)),
    (("#...", "..#.", ".#..", "...."), (3, 0), (0, 3)),
)
TOOL_EXAMPLE = "```python\nprint(bfs(grid, start, goal))\n```"
WRONG_TOOL_EXAMPLE = '```python\nprint("RRRR")\n```'


def example_env(grid: tuple[str, ...], start: tuple[int, int], goal: tuple[int, int]) -> PlanPathEnv:
    """A hand-made Plan-Path state (for worked examples): the grid, S at `start`, G at `goal`."""
    return PlanPathEnv.from_layout(grid, start, goal)


MOVE_ALIASES = {"U": "U", "D": "D", "L": "L", "R": "R", "UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"}

PlanPathState = ToolPlanState
"""One episode's state (the shared tool + plan state)."""


def parse_moves(text: str) -> list[str]:
    """The one plan in `text` ('RRD', 'R R D', 'right, down', 'Moves: U,L'; rules: `parse_plan`);
    [] when there is none or several."""
    return parse_plan(text, MOVE_ALIASES) or []


class PlanPathWorkflow(ToolPlanWorkflow):
    """tool -> plan, sequential; or the plan role alone (`single_agent=True`)."""

    helpers = TOOL_HELPERS
    instructions = CHAT_INSTRUCTIONS

    def __init__(
        self,
        task: PlanPathConfig,
        max_turns: int = 3,
        single_agent: bool = False,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        runner: Runner | None = None,
    ) -> None:
        if not isinstance(task, PlanPathConfig):
            raise TypeError(f"PlanPathWorkflow needs a PlanPathConfig, got {type(task).__name__}")
        self.task = task
        super().__init__(max_turns, single_agent, prompt_style, format_bonus, runner)

    def chat_examples(self, key: str) -> list[Example]:
        """tool: the helper called on the state's variables; plan: `follow` for a proposal that reaches
        the goal, the moves written out for one that does not; plan_single: the moves. None unless
        task.worked_examples."""
        if not self.task.worked_examples:
            return []
        envs = [example_env(*layout) for layout in EXAMPLE_GRIDS]
        if key == "tool":
            return [(self.observation(env), TOOL_EXAMPLE) for env in envs]
        if key == "plan_single":
            return [(self.observation(env), env.shortest_path()) for env in envs]
        shown = []
        for env, program in zip(envs, (TOOL_EXAMPLE, WRONG_TOOL_EXAMPLE)):
            right = program == TOOL_EXAMPLE
            proposal = env.shortest_path() if right else "RRRR"
            code = extract_code_block(program) or program  # the plan role sees the program as it ran
            state = ToolPlanState(env, program=code, output=proposal, simulation="goal" if right else "invalid")
            question = "\n".join([self.observation(env), *self.plan_context(state)])
            shown.append((question, "follow" if right else env.shortest_path()))
        return shown

    def make_env(self, split: str, index: int) -> PlanPathEnv:
        return make_instance(self.task, split, index)

    def observation(self, env: PlanPathEnv) -> str:
        (r, c), (gr, gc) = env.position, env.goal
        return f"{env.render()}\nstart=({r},{c}) goal=({gr},{gc})"

    def plan_context(self, state: ToolPlanState) -> list[str]:
        # The proposal comes last, right before the answer, where a tiny model copies it most easily.
        return [f"code:{state.program.strip()}", f"sim:{state.simulation}", f"out:{state.output}"]

    def namespace(self, env: PlanPathEnv) -> str:
        return f"grid = {list(env.grid)!r}\nstart = {env.position!r}\ngoal = {env.goal!r}"

    def parse_action(self, text: str, env: PlanPathEnv) -> list[str] | None:
        return parse_moves(text) or None

    def show_action(self, action: list[str]) -> str:
        return "".join(action)
