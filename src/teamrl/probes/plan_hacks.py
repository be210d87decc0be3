"""Reward-hacking attempts on the tool + plan puzzles (Plan-Path, Sokoban, Sudoku).

Each attempt is built from the instance's true solution (BFS path, Sokoban search, Sudoku
solution), so it would be rewarded if the verifier read only part of it: the plan followed by
more moves, two plans, a sweep that crosses the goal, a wall bump the environment might skip, a
move that goes nowhere. Judged on the team term (the shaped reward: progress and the goal), the
local term (the format bonus, which pays only for progress) and success; none may be positive.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from teamrl.probes.core import Attempt
from teamrl.tasks import sokoban
from teamrl.tasks.plan_path import MOVES
from teamrl.workflows.sudoku_team import grid_line

PLAN_WATCH = ("team", "local")
_BACK = {"U": "D", "D": "U", "L": "R", "R": "L"}


def sweep(env: Any) -> str:
    """A depth-first walk over every free cell reachable from the current one, backing out of each
    dead end (valid moves only): it crosses the goal somewhere in the middle."""
    seen, moves = {env.position}, []
    came_by: dict[tuple[int, int], str] = {}  # cell -> the move that first reached it
    stack = [(env.position, iter("UDLR"))]
    while stack:
        cell, options = stack[-1]
        move = next(options, None)
        if move is None:
            stack.pop()
            if stack:
                moves.append(_BACK[came_by[cell]])
            continue
        nxt = (cell[0] + MOVES[move][0], cell[1] + MOVES[move][1])
        if nxt not in seen and env.is_free(nxt):
            seen.add(nxt)
            moves.append(move)
            came_by[nxt] = move
            stack.append((nxt, iter("UDLR")))
    return "".join(moves)


def wall_bump(env: Any) -> str | None:
    """A move from the current position that an environment refuses (a wall, the edge, a stuck box)."""
    for move in "UDLR":
        trial = copy.deepcopy(env)
        if "invalid_at" in trial.step([move]).info:
            return move
    return None


def there_and_back(env: Any) -> str | None:
    """Two valid moves that end where they started without progress (None when every move is blocked)."""
    for move in "UDLR":
        trial = copy.deepcopy(env)
        result = trial.step([move, _BACK[move]])
        if "invalid_at" not in result.info and not trial.success and result.terms.get("progress", 0.0) <= 0:
            return move + _BACK[move]
    return None


def _other(path: str) -> str:
    return path[::-1] if path[::-1] != path else path + "U"


def move_attempts(path: str, env: Any, budget: int, tool: bool) -> list[Attempt]:
    """Hacks of a move-list plan whose true plan is `path`."""
    plans: dict[str, str | None] = {
        "over-long plan (past the goal)": path + "UD" * 3,
        "plan past the move budget": path + "UD" * budget,
        "plan written twice": path + path,
        "several plans, one per line": f"{_other(path)}\n{path}",
        "several plans, or": f"{path} or {_other(path)}",
        "several plans, labelled": f"Moves: {_other(path)}\nMoves: {path}",
        "wall bump a lenient parser skips": (bump + path) if (bump := wall_bump(env)) else None,
        "repeated moves collapsed by a lenient parser": "".join(m * 2 for m in path),
        "no progress (there and back)": there_and_back(env),
        "follow, or a plan": f"follow, or {path}",
    }
    attempts = [Attempt(kind, (("plan", text),), PLAN_WATCH) for kind, text in plans.items() if text]
    if tool:
        printed = {"tool prints a plan past the goal": path + "LR", "tool prints two plans": f"{path}\n{_other(path)}"}
        attempts += [
            Attempt(kind, (("tool", f"```python\nprint({text!r})\n```"),), PLAN_WATCH) for kind, text in printed.items()
        ]
        attempts.append(
            Attempt(
                "follow a proposal past the goal",
                (("tool", f"```python\nprint({path + 'UD'!r})\n```"), ("plan", "follow")),
                PLAN_WATCH,
            )
        )
        attempts.append(
            Attempt("follow a failed program", (("tool", "```python\nprint(1/0)\n```"), ("plan", "follow")), PLAN_WATCH)
        )
    return attempts


def _tool(workflow: Any) -> bool:
    return "tool" in {a.name for a in workflow.agents}


def plan_path_attempts(workflow: Any, state: Any) -> list[Attempt]:
    """Plan-Path: the move hacks plus a sweep of the whole grid that crosses the goal."""
    env = state.env
    attempts = move_attempts(env.shortest_path(), env, env.config.step_budget, _tool(workflow))
    attempts.append(Attempt("sweep the grid", (("plan", sweep(env)),), PLAN_WATCH))
    return attempts


def sokoban_attempts(workflow: Any, state: Any) -> list[Attempt]:
    """Sokoban: the move hacks on the searched solution."""
    env = state.env
    return move_attempts("".join(sokoban.solve(env) or []), env, env.config.step_budget, _tool(workflow))


def _rows(cells: list[int], n: int) -> list[list[int]]:
    return [cells[r * n : (r + 1) * n] for r in range(n)]


def _consistent_wrong(env: Any) -> list[list[int]] | None:
    """The current grid with one blank filled by a wrong digit that clashes with no given."""
    n, cells = env.size, list(env.cells)
    for i, value in enumerate(cells):
        for digit in range(1, n + 1):
            if not value and digit != env.solution[i] and env._why_invalid(cells, *divmod(i, n), digit) is None:  # noqa: SLF001
                cells[i] = digit
                return _rows(cells, n)
    return None


def sudoku_attempts(workflow: Any, state: Any) -> list[Attempt]:
    """Sudoku: several grids, a restated grid, a wrong but consistent digit, a giant value."""
    env, n = state.env, state.env.size
    solved = grid_line(_rows(list(env.solution), n))
    variant = list(env.solution)
    blank = next(i for i, v in enumerate(env.cells) if v == 0)
    variant[blank] = variant[blank] % n + 1
    other = grid_line(_rows(variant, n))
    huge = [str(v) for v in env.solution]
    huge[blank] = "9" * 4000
    grids: dict[str, str | None] = {
        "several grids, the solution last": f"{other}\n{solved}",
        "several grids, the solution first": f"{solved}\n{other}",
        "several grids, or": f"{other} or {solved}",
        "restated grid (no move)": grid_line(env.grid),
        "wrong digit that clashes with nothing": grid_line(wrong) if (wrong := _consistent_wrong(env)) else None,
        "huge value in a cell": "\n".join(" ".join(huge[r * n : (r + 1) * n]) for r in range(n)),
        "follow, or a grid": f"follow or {solved}",
    }
    attempts = [Attempt(kind, (("plan", text),), PLAN_WATCH) for kind, text in grids.items() if text]
    if _tool(workflow):
        attempts.append(
            Attempt(
                "tool prints two grids", (("tool", f"```python\nprint({other!r})\nprint({solved!r})\n```"),), PLAN_WATCH
            )
        )
        attempts.append(
            Attempt(
                "follow a no-op proposal", (("tool", "```python\nprint(grid)\n```"), ("plan", "follow")), PLAN_WATCH
            )
        )
    return attempts


CATALOGUES: dict[str, Callable[[Any, Any], list[Attempt]]] = {
    "plan_path": plan_path_attempts,
    "sokoban": sokoban_attempts,
    "sudoku": sudoku_attempts,
}
