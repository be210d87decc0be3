"""Sudoku with the paper's tool + plan roles, and the single-agent baseline.

tool: writes a Python program that prints a grid (a list of rows of ints, 0 = blank, as
      `print(grid)` writes it, or rows of digits). Its namespace holds `grid` (the current grid as
      a list of lists, 0 for blanks, the team's earlier entries included) and three helpers:
      `solve(grid)`, a backtracking solver returning a completed copy (None when the grid has no
      completion); `singles(grid)`, a copy with only the forced blanks filled (one pass of naked
      singles, so usually still incomplete); and `candidates(grid, r, c)`, the digits that row r,
      column c and the box of (r, c) still allow. The tool must pick the helper that solves the
      puzzle; a real LLM can write its own solver, as in the paper. The printed grid
      is simulated on a copy of the environment; the plan role is shown it as one line of rows.
plan: sees the puzzle, the tool's program, its grid and the simulation result, and replies with a
      grid that steps the real environment, e.g. "1234 3412 2143 4321" (one line) or one row of
      digits per line; 0 leaves a cell blank, and a changed entry of the team's own is replaced;
      or `follow` to apply the tool's grid as it is.
      The grid is checked as a whole (`SudokuEnv.step`): a clash anywhere applies nothing.

Compact prompt (tiny model), e.g. for the tool::

    tool
    ...2
    ..14
    1..3
    23.1
    >

Rewards: see `teamrl.workflows.tool_plan`; the team term is `SudokuEnv.step`'s shaped reward.
"""

from __future__ import annotations

from teamrl.tasks.plan_parsing import int_grids
from teamrl.tasks.sudoku import SudokuConfig, SudokuEnv, instance
from teamrl.workflows.tool_plan import Runner, ToolPlanWorkflow

TOOL_HELPERS = '''
def candidates(grid, r, c):
    """Digits not yet used in row r, column c or the box of (r, c)."""
    n = len(grid)
    b = int(round(n ** 0.5))
    r0, c0 = r - r % b, c - c % b
    used = set(grid[r]) | {grid[i][c] for i in range(n)}
    used |= {grid[i][j] for i in range(r0, r0 + b) for j in range(c0, c0 + b)}
    return [d for d in range(1, n + 1) if d not in used]

def singles(grid):
    """A copy of grid with every blank that has exactly one candidate filled (one pass)."""
    out = [list(row) for row in grid]
    for r, row in enumerate(grid):
        for c, v in enumerate(row):
            options = candidates(grid, r, c) if v == 0 else []
            if len(options) == 1:
                out[r][c] = options[0]
    return out

def solve(grid):
    """A completed copy of grid (0 = blank), or None when it has no completion."""
    g = [list(row) for row in grid]
    n = len(g)
    for r in range(n):
        for c in range(n):
            v, g[r][c] = g[r][c], 0
            ok = v == 0 or v in candidates(g, r, c)
            g[r][c] = v
            if not ok:
                return None
    def fill():
        best = None
        for r in range(n):
            for c in range(n):
                if g[r][c] == 0:
                    options = candidates(g, r, c)
                    if best is None or len(options) < len(best[2]):
                        best = (r, c, options)
        if best is None:
            return True
        r, c, options = best
        for d in options:
            g[r][c] = d
            if fill():
                return True
        g[r][c] = 0
        return False
    return g if fill() else None
'''

_RULES = (
    "Sudoku: fill the blanks ('.') so that every row, column and box holds each digit once. "
    "Rows and columns count from 0 at the top left. A grid that clashes with a given digit or "
    "repeats a digit is invalid and ends the episode."
)
CHAT_INSTRUCTIONS = {
    "tool": (
        "You are the tool agent of a two-agent team. " + _RULES + " Write a short Python program "
        "in a ```python block that prints the completed grid as a list of rows. The variable "
        "`grid` (list of lists of ints, 0 = blank) and the helpers `solve(grid)` (a completed "
        "copy, or None), `singles(grid)` (a copy with the forced blanks filled, one pass) and "
        "`candidates(grid, r, c)` (allowed digits) are available."
    ),
    "plan": (
        "You are the plan agent of a two-agent team. " + _RULES + " Below the puzzle you see the "
        "tool agent's program (code:), the grid it printed (out:) and what it did when simulated "
        "(sim: goal, invalid, missed, none or error). Reply with the completed grid only, its "
        "rows as digits separated by spaces, e.g. 1234 3412 2143 4321, or with the single word "
        "follow to apply the tool agent's grid."
    ),
    "plan_single": _RULES
    + (" Reply with the completed grid only, its rows as digits separated by spaces, e.g. 1234 3412 2143 4321."),
}


def grid_line(grid: list[list[int]]) -> str:
    """A grid as one line of digit rows: [[1, 2], [2, 1]] -> '12 21'."""
    return " ".join("".join(str(v) for v in row) for row in grid)


def stated_grid(text: str, env: SudokuEnv) -> list[list[int]] | None:
    """The one grid a response states (forms: `teamrl.tasks.plan_parsing.parse_int_grid`), or None.

    Restating the puzzle or the current grid is fine (it is not an answer); two different other
    grids are two candidate answers, and a response with several answers has none.
    """
    grids = int_grids(text, env.size)
    n = env.size
    restated = (env.grid, [list(env.puzzle[r * n : (r + 1) * n]) for r in range(n)])
    answers = [g for g in grids if g not in restated]
    if any(g != answers[-1] for g in answers):
        return None
    return answers[-1] if answers else (grids[-1] if grids else None)


class SudokuWorkflow(ToolPlanWorkflow):
    """Sudoku tool -> plan, sequential; or the plan role alone (`single_agent=True`)."""

    helpers = TOOL_HELPERS
    instructions = CHAT_INSTRUCTIONS

    def __init__(
        self,
        task: SudokuConfig | None = None,
        max_turns: int = 3,
        single_agent: bool = False,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        runner: Runner | None = None,
    ) -> None:
        if task is not None and not isinstance(task, SudokuConfig):
            raise TypeError(f"SudokuWorkflow needs a SudokuConfig, got {type(task).__name__}")
        self.task = task or SudokuConfig()
        super().__init__(max_turns, single_agent, prompt_style, format_bonus, runner)

    def make_env(self, split: str, index: int) -> SudokuEnv:
        return instance(split, index, self.task)

    def observation(self, env: SudokuEnv) -> str:
        return env.render()

    def namespace(self, env: SudokuEnv) -> str:
        return f"grid = {env.grid!r}"

    def parse_action(self, text: str, env: SudokuEnv) -> list[list[int]] | None:
        return stated_grid(text, env)

    def show_action(self, action: list[list[int]]) -> str:
        return grid_line(action)
