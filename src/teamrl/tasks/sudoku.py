"""Sudoku (4x4 with 2x2 boxes, or 9x9 with 3x3 boxes) with a unique solution.

A full valid grid is drawn from the seed by a randomized backtracking search, then cells are
blanked in a random order, each blank kept only if the solution stays unique.

Actions (already parsed; see `teamrl.tasks.plan_parsing`):

* a list of placements ``(row, col, digit)`` with 0-based row and col, applied one by one.
  Digit 0 clears a cell filled earlier. A placement is invalid when it is out of range, touches
  a given (fixed) cell, or repeats a digit already in its row, column or box; the invalid
  placement is not applied and the episode ends.
* a whole grid: a list of `size` rows of `size` ints (0 = blank). It is checked as a whole (so a
  corrected grid is not rejected because of the agent's own earlier entries) and applied as the
  placements of the cells it changes, in row-major order. If it is invalid nothing is applied.

`render()` gives the rows as digits with "." for blanks, e.g. ``"12.4"``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from teamrl.tasks.base import HELD_OUT_SEED_OFFSET, StepResult, check_puzzle_settings, split_seed
from teamrl.tasks.sudoku_grid import BOX, other_solution_exists, peers, search

_MAX_BLANKS = {4: 12, 9: 64}  # a uniquely solvable puzzle needs >= 4 (4x4) / 17 (9x9) givens

Placement = tuple[int, int, int]


@dataclass(frozen=True)
class SudokuConfig:
    """Puzzle generation settings and the shaped reward's terms."""

    size: int = 4
    """Grid side: 4 (2x2 boxes) or 9 (3x3 boxes)."""
    num_blanks: int = 0
    """Cells to blank; 0 means half the grid rounded down (8 for 4x4, 40 for 9x9)."""
    max_steps: int = 0
    """Placement budget per episode; 0 means 2 * number of blanks."""
    step_cost: float = 0.01
    """Subtracted per executed placement."""
    invalid_penalty: float = 0.5
    """Subtracted for an invalid placement (the episode then ends)."""
    progress_coef: float = 0.5
    """Times the change in correctly filled cells, divided by the number of blanks."""
    goal_bonus: float = 1.0
    """Added when the grid is solved (the episode then ends)."""
    heldout_instances: int = 200
    """How many held-out puzzles the training split must avoid."""
    max_attempts: int = 50
    """Full grids tried per seed before giving up (many blanks can need several)."""

    def __post_init__(self) -> None:
        if self.size not in BOX:
            raise ValueError(f"sudoku.size must be 4 or 9, got {self.size}")
        limit = _MAX_BLANKS[self.size]
        if not 0 <= self.num_blanks <= limit:
            raise ValueError(
                f"sudoku.num_blanks must be between 1 and {limit} for a {self.size}x{self.size} "
                f"grid (0 = default), got {self.num_blanks}"
            )
        check_puzzle_settings(self, "sudoku")

    @property
    def blanks(self) -> int:
        """The number of blanks actually used (num_blanks, or its default)."""
        return self.num_blanks or self.size * self.size // 2

    @property
    def step_budget(self) -> int:
        """The placement budget actually used (max_steps, or its default)."""
        return self.max_steps or 2 * self.blanks


def generate_puzzle(
    config: SudokuConfig, seed: int, avoid: frozenset[tuple[int, ...]] = frozenset()
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(puzzle, solution) for `seed` as flat tuples; the puzzle is not in `avoid`."""
    rng = random.Random(seed)  # built here, never stored, so environments stay cheap to copy
    n = config.size
    for _ in range(config.max_attempts):
        _, solution = search([0] * (n * n), n, limit=1, rng=rng)
        assert solution is not None, "an empty grid always has a completion"
        puzzle = list(solution)
        order = list(range(n * n))
        rng.shuffle(order)
        removed = 0
        for cell in order:
            if removed == config.blanks:
                break
            answer = puzzle[cell]
            puzzle[cell] = 0
            # Two solutions differ in at least 4 cells, so the first 3 blanks are always safe.
            if removed >= 3 and other_solution_exists(puzzle, cell, answer, n):
                puzzle[cell] = answer
            else:
                removed += 1
        if removed == config.blanks and tuple(puzzle) not in avoid:
            return tuple(puzzle), tuple(solution)
    raise RuntimeError(
        f"sudoku: no {n}x{n} puzzle with {config.blanks} blanks and a unique solution for seed "
        f"{seed} after {config.max_attempts} attempts; lower num_blanks or raise max_attempts"
    )


_HELDOUT_CACHE: dict[tuple, frozenset[tuple[int, ...]]] = {}


def heldout_puzzles(config: SudokuConfig) -> frozenset[tuple[int, ...]]:
    """The first `config.heldout_instances` held-out puzzles (cached per generation settings)."""
    key = (config.size, config.blanks, config.max_attempts, config.heldout_instances)
    if key not in _HELDOUT_CACHE:
        _HELDOUT_CACHE[key] = frozenset(
            generate_puzzle(config, split_seed("heldout", i))[0] for i in range(config.heldout_instances)
        )
    return _HELDOUT_CACHE[key]


class SudokuEnv:
    """One Sudoku puzzle. The action is a list of (row, col, digit) placements, or a full grid.

    The mutable state is one flat list (`cells`); `__deepcopy__` copies it and shares the rest,
    which is immutable.
    """

    def __init__(self, config: SudokuConfig | None = None) -> None:
        if config is not None and not isinstance(config, SudokuConfig):
            raise TypeError(f"SudokuEnv needs a SudokuConfig, got {type(config).__name__}")
        self.config = config or SudokuConfig()
        self.seed: int | None = None
        self.puzzle: tuple[int, ...] = ()
        self.solution: tuple[int, ...] = ()
        self.cells: list[int] = []
        self.steps_taken = 0
        self.hit_invalid = False

    def __deepcopy__(self, memo: dict) -> SudokuEnv:
        clone = object.__new__(SudokuEnv)
        clone.__dict__.update(self.__dict__)
        clone.cells = list(self.cells)
        memo[id(self)] = clone
        return clone

    def reset(self, seed: int) -> None:
        """Build the puzzle for `seed`; training seeds skip puzzles of the held-out set."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        avoid = heldout_puzzles(self.config) if seed < HELD_OUT_SEED_OFFSET else frozenset()
        self.puzzle, self.solution = generate_puzzle(self.config, seed, avoid)
        self.seed = seed
        self.cells = list(self.puzzle)
        self.steps_taken = 0
        self.hit_invalid = False

    def _require_puzzle(self) -> None:
        if not self.puzzle:
            raise RuntimeError("SudokuEnv has no puzzle yet: call reset(seed) first")

    @property
    def size(self) -> int:
        return self.config.size

    @property
    def grid(self) -> list[list[int]]:
        """The current grid as rows (0 = blank); a copy."""
        n = self.size
        return [self.cells[r * n : (r + 1) * n] for r in range(n)]

    @property
    def success(self) -> bool:
        return bool(self.puzzle) and tuple(self.cells) == self.solution

    @property
    def done(self) -> bool:
        return self.success or self.hit_invalid or self.steps_taken >= self.config.step_budget

    def forfeit(self) -> StepResult:
        """End the episode as failed with the invalid-move penalty (for a plan that parses to nothing),
        so that saying nothing is never cheaper than a move that might be invalid."""
        self.hit_invalid = True
        penalty = -self.config.invalid_penalty
        return StepResult(reward=penalty, done=True, terms={"invalid": penalty}, info={"executed": 0})

    def correct_cells(self) -> int:
        """How many blank cells of the puzzle hold their solution digit."""
        return sum(1 for i, given in enumerate(self.puzzle) if not given and self.cells[i] == self.solution[i])

    def _why_invalid(self, cells: Sequence[int], r: int, c: int, d: int) -> str | None:
        """Why writing digit `d` at (r, c) of the flat grid `cells` is invalid, or None."""
        n = self.size
        if not (0 <= r < n and 0 <= c < n and 0 <= d <= n):
            return f"is out of range: row and col 0..{n - 1}, digit 1..{n} (0 clears)"
        cell = r * n + c
        if self.puzzle[cell]:
            return "changes a given cell"
        if d and any(cells[p] == d for p in peers(n)[cell]):
            return f"repeats {d} in its row, column or box"
        return None

    def _placements(self, action: Any) -> tuple[list[Placement], bool]:
        """The action as placements, and whether it was a whole grid. Raises for bad shapes."""
        n = self.size
        if isinstance(action, (str, bytes)) or not isinstance(action, (list, tuple)):
            raise TypeError(
                f"sudoku action must be a list of (row, col, digit) or a list of {n} rows, got {type(action).__name__}"
            )
        is_grid = len(action) == n and all(isinstance(row, (list, tuple)) and len(row) == n for row in action)
        if is_grid:
            items = [(r, c, action[r][c]) for r in range(n) for c in range(n)]
        else:
            items = []
            for item in action:
                if not isinstance(item, (list, tuple)) or len(item) != 3:
                    raise TypeError(f"sudoku placement must be (row, col, digit), got {item!r}")
                items.append(tuple(item))
        for item in items:
            if any(isinstance(x, bool) or not isinstance(x, int) for x in item):
                raise TypeError(f"sudoku placement values must be ints, got {item!r}")
        if is_grid:  # only the cells the grid changes are placements
            items = [(r, c, d) for r, c, d in items if d != self.cells[r * n + c]]
        return items, is_grid

    def step(self, action: Sequence[Any]) -> StepResult:
        """Apply placements in order; stop at the first invalid one, the goal, or the budget.

        info: "executed", "ignored" (placements left unread after the episode ended) and, on an
        invalid placement, "invalid_at" (0-based index among the placements; for a grid, among
        the cells it changes, row-major), "cell" (row, col) and "reason".
        """
        self._require_puzzle()
        placements, is_grid = self._placements(action)
        if self.done:
            raise RuntimeError("the episode is over: call reset(seed) before stepping again")
        cfg, n = self.config, self.size
        terms = {"step_cost": 0.0, "invalid": 0.0, "progress": 0.0, "goal": 0.0}
        info: dict[str, object] = {"grid": is_grid}
        before = self.correct_cells()
        bad: tuple[int, str] | None = None
        if is_grid:
            # A grid is judged as the final state it asks for, so a corrected grid is not
            # rejected for clashing with the agent's own earlier (now replaced) entries.
            final = list(self.cells)
            for r, c, d in placements:
                if 0 <= r < n and 0 <= c < n:
                    final[r * n + c] = d
            for index, (r, c, d) in enumerate(placements):
                reason = self._why_invalid(final, r, c, d)
                if reason is not None:
                    bad = (index, reason)
                    break
        executed = 0
        for index, (r, c, d) in enumerate(placements):
            if self.done or (bad is not None and is_grid):
                break
            reason = None if is_grid else self._why_invalid(self.cells, r, c, d)
            if reason is not None:
                bad = (index, reason)
                break
            self.cells[r * n + c] = d
            executed += 1
            self.steps_taken += 1
        terms["step_cost"] = -cfg.step_cost * executed if executed else 0.0
        if bad is not None:
            self.hit_invalid = True
            terms["invalid"] -= cfg.invalid_penalty
            index, reason = bad
            r, c, d = placements[index]
            info.update(invalid_at=index, cell=(r, c), reason=f"placement ({r}, {c}, {d}) {reason}")
        gained = self.correct_cells() - before
        terms["progress"] = cfg.progress_coef * gained / cfg.blanks
        if self.success:
            terms["goal"] = cfg.goal_bonus
        elif self.steps_taken >= cfg.step_budget:
            info["budget_exhausted"] = True
        info["executed"] = executed
        info["ignored"] = len(placements) - executed - (1 if self.hit_invalid else 0)
        return StepResult(reward=sum(terms.values()), done=self.done, terms=terms, info=info)

    def render(self) -> str:
        """The grid as rows of digits, "." for blanks."""
        self._require_puzzle()
        return "\n".join("".join(str(d) if d else "." for d in row) for row in self.grid)


def solve(env: SudokuEnv) -> list[Placement]:
    """Placements that take `env` from its current state to the solution.

    Wrong entries are cleared first (digit 0) so no placement clashes with a stale entry.
    The solution is recomputed from the givens with the solver, not read from the environment.
    """
    env._require_puzzle()
    n = env.size
    count, solution = search(env.puzzle, n, limit=2)
    if count != 1 or solution is None:
        raise RuntimeError(f"sudoku puzzle of seed {env.seed} has {count} solutions, expected 1")
    wrong = [i for i, v in enumerate(env.cells) if v and v != solution[i]]
    missing = [i for i, v in enumerate(env.cells) if v != solution[i]]
    return [(i // n, i % n, 0) for i in wrong] + [(i // n, i % n, solution[i]) for i in missing]


def instance(split: str, index: int, config: SudokuConfig | None = None) -> SudokuEnv:
    """Instance `index` of a split ('train' or 'heldout'), reset and ready."""
    env = SudokuEnv(config)
    env.reset(split_seed(split, index))
    return env
