"""Sokoban with the paper's tool + plan roles, and the single-agent baseline.

tool: writes a Python program that prints a move string (e.g. "RRDL"). Its namespace holds
      `grid` (the rendered room as a list of row strings, legend in `teamrl.tasks.sokoban`),
      `player` (row, col), `boxes` [(row, col), ...] and `solve(grid, player, boxes)`: a
      breadth-first search returning the shortest move string that pushes every box onto a target,
      '' when there is none. Only walls and targets are read from `grid`, so the tool must pass the
      state to the helper in the right order (the tiny model's skill, as `bfs(grid, start, goal)`
      is on Plan-Path; a character model does not copy coordinates reliably, so the state is named).
      A real LLM can write its own search instead, as in the paper. The moves are simulated on a
      copy of the environment.
plan: sees the room, the positions, the tool's program, its moves and the simulation result, and
      replies with moves (U/D/L/R, 'RRDL' or 'right, down', ...) that step the real environment, or
      `follow` to execute the tool's moves as they are.

Compact prompt (tiny model), e.g. for the tool::

    tool
    ######
    ###..#
    ##..x#
    #..$##
    #.#.@#
    ######
    player=(4,4) boxes=[(3,3)]
    >

Rewards: see `teamrl.workflows.tool_plan`; the team term is `SokobanEnv.step`'s shaped reward.
"""

from __future__ import annotations

from teamrl.tasks.plan_parsing import parse_plan
from teamrl.tasks.sokoban import SokobanConfig, SokobanEnv, instance
from teamrl.workflows.tool_plan import Runner, ToolPlanWorkflow

MOVE_ALIASES = {"U": "U", "D": "D", "L": "L", "R": "R", "UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"}

TOOL_HELPERS = '''
from collections import deque
def solve(grid, player, boxes):
    """Shortest move string pushing every box onto a target ('x', '*', '+'), '' if none.

    player: (row, col); boxes: [(row, col), ...] (a single (row, col) is accepted too).
    Only walls ('#') and targets are read from grid.
    """
    if len(boxes) == 2 and all(isinstance(v, int) for v in boxes):
        boxes = [boxes]
    rows, cols = len(grid), len(grid[0])
    targets = frozenset((r, c) for r in range(rows) for c in range(cols) if grid[r][c] in "x*+")
    def free(cell):
        return 0 <= cell[0] < rows and 0 <= cell[1] < cols and grid[cell[0]][cell[1]] != "#"
    start = (tuple(player), frozenset(tuple(b) for b in boxes))
    if not free(start[0]) or start[0] in start[1] or not all(free(b) for b in start[1]):
        return ""
    prev = {start: None}
    queue = deque([start])
    while queue and len(prev) < 200000:
        state = queue.popleft()
        if state[1] == targets:
            out = []
            while prev[state] is not None:
                state, move = prev[state]
                out.append(move)
            return "".join(reversed(out))
        (r, c), bx = state
        for move, dr, dc in (("U", -1, 0), ("D", 1, 0), ("L", 0, -1), ("R", 0, 1)):
            nxt = (r + dr, c + dc)
            if not free(nxt):
                continue
            new_boxes = bx
            if nxt in bx:
                dest = (nxt[0] + dr, nxt[1] + dc)
                if not free(dest) or dest in bx:
                    continue
                new_boxes = (bx - {nxt}) | {dest}
            if (nxt, new_boxes) not in prev:
                prev[(nxt, new_boxes)] = (state, move)
                queue.append((nxt, new_boxes))
    return ""
'''

_RULES = (
    "Sokoban: push every box onto a target. Legend: # wall, . floor, x target, $ box, "
    "* box on a target, @ player, + player on a target. Rows and columns count from 0 at the "
    "top left; U = row-1, D = row+1, L = col-1, R = col+1. Walking into a wall, or pushing a box "
    "into a wall or another box, is invalid and ends the episode."
)
CHAT_INSTRUCTIONS = {
    "tool": (
        "You are the tool agent of a two-agent team. " + _RULES + " Write a short Python program "
        "in a ```python block that prints the moves as a string of U/D/L/R. The variables `grid` "
        "(list of row strings), `player` ((row, col)) and `boxes` ([(row, col), ...]) and the "
        "helper `solve(grid, player, boxes)` are available: it returns the shortest move string "
        "for that player and those boxes, '' if none."
    ),
    "plan": (
        "You are the plan agent of a two-agent team. " + _RULES + " Below the room you see the "
        "tool agent's program (code:), the moves it printed (out:) and what they did when "
        "simulated (sim: goal, invalid, missed, none or error). Reply with the moves only, as a "
        "string of U/D/L/R, or with the single word follow to execute the tool agent's moves."
    ),
    "plan_single": _RULES + " Reply with the moves only, as a string of U/D/L/R.",
}


def parse_moves(text: str) -> list[str] | None:
    """The one plan in `text` ('RRDL', 'R R D L', 'right, down'; rules: `parse_plan`), None when
    there is none or several."""
    return parse_plan(text, MOVE_ALIASES)


def _cells(cells: list[tuple[int, int]]) -> str:
    return "[" + ",".join(f"({r},{c})" for r, c in cells) + "]"


class SokobanWorkflow(ToolPlanWorkflow):
    """Sokoban tool -> plan, sequential; or the plan role alone (`single_agent=True`)."""

    helpers = TOOL_HELPERS
    instructions = CHAT_INSTRUCTIONS

    def __init__(
        self,
        task: SokobanConfig | None = None,
        max_turns: int = 3,
        single_agent: bool = False,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        runner: Runner | None = None,
    ) -> None:
        if task is not None and not isinstance(task, SokobanConfig):
            raise TypeError(f"SokobanWorkflow needs a SokobanConfig, got {type(task).__name__}")
        self.task = task or SokobanConfig()
        super().__init__(max_turns, single_agent, prompt_style, format_bonus, runner)

    def make_env(self, split: str, index: int) -> SokobanEnv:
        return instance(split, index, self.task)

    def observation(self, env: SokobanEnv) -> str:
        r, c = env.player_cell
        return f"{env.render()}\nplayer=({r},{c}) boxes={_cells(env.box_cells)}"

    def namespace(self, env: SokobanEnv) -> str:
        r, c = env.player_cell
        return f"grid = {env.render().splitlines()!r}\nplayer = ({r}, {c})\nboxes = {list(env.box_cells)!r}"

    def parse_action(self, text: str, env: SokobanEnv) -> list[str] | None:
        return parse_moves(text)

    def show_action(self, action: list[str]) -> str:
        return "".join(action)
