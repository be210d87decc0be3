"""Split-Nav: a two-role grid navigation task where each role sees half of the state.

The *spotter* sees the map with the goal G drawn on it (not the start) and must report G's cell;
the *walker* sees the map with its start S (not the goal) and the spotter's report, and must walk
there. Neither can solve the task alone: without the report the walker does not know where to go,
and the spotter cannot move. A single agent that sees both (the single-agent baseline) must do both
jobs in one answer.

Instances are procedural Plan-Path grids (solvable by construction) split into train / validation /
test by content (`teamrl.tasks.content_splits`), so no grid is shared between splits.

Verifiers are strict on purpose (an adversary's target): a report is exactly one cell, "rc" or
"r,c" (optionally in parentheses); a walk is only U/D/L/R letters, at most the move budget.
Anything else is malformed: no team or local credit, and the format penalty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from teamrl.tasks.content_splits import check_heldout_split, draw_in_split, resolve_split
from teamrl.tasks.plan_path import MOVES, PlanPathConfig, PlanPathEnv, distances_to, generate_grid

Cell = tuple[int, int]
Layout = tuple[tuple[str, ...], Cell, Cell]

_CELL_RE = re.compile(r"\(?\s*(\d)\s*,?\s*(\d)\s*\)?")
_WALK_RE = re.compile(r"[UDLR]+")


@dataclass(frozen=True)
class SplitNavConfig:
    """Split-Nav grid settings, reward magnitudes and which split 'heldout' means."""

    size: int = 5
    """Grid side length N (N x N cells, at most 10 so a cell is two digits)."""
    wall_prob: float = 0.05
    """Probability that a cell is a wall (S and G are never walls). At 0.2 the warmed-up tiny walker
    found the way to a correctly reported goal 2% of the time (it cannot plan detours in its head)."""
    min_distance: int = 2
    """Shortest S-G path length of every instance at least."""
    progress_coef: float = 0.5
    """Walker's local reward: this times the fraction of the start distance to G it closed, for a walk
    without an invalid move (a walk into a wall or off the grid earns no local credit)."""
    closeness_coef: float = 0.5
    """Spotter's local reward: this times 1 - (Manhattan error of its report) / (2 (N - 1))."""
    format_penalty: float = 0.1
    """Subtracted from an answer that is malformed (empty, several cells, letters other than UDLR, too long)."""
    heldout_split: str = "validation"
    """Which split the framework's held-out evaluation plays: validation (checkpoint picking) or test."""

    def __post_init__(self) -> None:
        if not 3 <= self.size <= 10:
            raise ValueError(f"split_nav.size must be between 3 and 10 (a cell is two digits), got {self.size}")
        if not 0.0 <= self.wall_prob < 0.5:
            raise ValueError(f"split_nav.wall_prob must be in [0, 0.5), got {self.wall_prob}")
        if not 1 <= self.min_distance <= 2 * (self.size - 1):
            raise ValueError(f"split_nav.min_distance must be in [1, {2 * (self.size - 1)}] for size "
                             f"{self.size}, got {self.min_distance}")
        for name in ("progress_coef", "closeness_coef", "format_penalty"):
            if getattr(self, name) < 0:
                raise ValueError(f"split_nav.{name} must be >= 0 (it is a magnitude), got {getattr(self, name)}")
        check_heldout_split("split_nav", self.heldout_split)

    @property
    def step_budget(self) -> int:
        """The longest walk accepted: 4 N moves (a shortest path is at most about N^2 / 2)."""
        return 4 * self.size

    def grid_config(self) -> PlanPathConfig:
        return PlanPathConfig(size=self.size, wall_prob=self.wall_prob, min_distance=self.min_distance)


@lru_cache(maxsize=4096)
def instance(config: SplitNavConfig, split: str, index: int) -> Layout:
    """Instance `index` of a split ('train', 'validation', 'test'; 'heldout' = config.heldout_split)."""
    name = resolve_split(split, config.heldout_split)
    grid = config.grid_config()
    return draw_in_split(name, index, lambda seed: generate_grid(grid, seed), key=lambda layout: layout)


def make_env(config: SplitNavConfig, layout: Layout) -> PlanPathEnv:
    """A Plan-Path environment at the layout's start (it steps the walker's moves and checks the goal)."""
    env = PlanPathEnv(config.grid_config())
    env.grid, env.start, env.goal = layout
    env.position = env.start
    env._dist = distances_to(list(env.grid), env.goal)  # noqa: SLF001 - the env's own cache, set as reset does
    return env


def parse_cell(text: str, size: int) -> Cell | None:
    """The one cell a report names ('23', '2,3', '(2, 3)'), or None: anything else, or off the grid.

    >>> parse_cell("2,3", 5), parse_cell("(0 4)", 5), parse_cell("23 24", 5), parse_cell("77", 5)
    ((2, 3), (0, 4), None, None)
    """
    match = _CELL_RE.fullmatch(text.strip())
    if match is None:
        return None
    cell = (int(match.group(1)), int(match.group(2)))
    return cell if max(cell) < size else None


def parse_walk(text: str, budget: int) -> list[str] | None:
    """The moves of a walk: only the letters U, D, L, R (no spaces), 1..budget of them; else None.

    >>> parse_walk("RRD", 20), parse_walk("go right", 20), parse_walk("R" * 21, 20)
    (['R', 'R', 'D'], None, None)
    """
    text = text.strip()
    if not _WALK_RE.fullmatch(text) or len(text) > budget:
        return None
    return list(text)


def spotter_terms(config: SplitNavConfig, goal: Cell, report: Cell | None) -> dict[str, float]:
    """team: 1 when the report is G's cell; local: closeness of a well-formed report; format: the penalty
    when there is none."""
    if report is None:
        return {"team": 0.0, "local": 0.0, "format": -config.format_penalty}
    error = abs(report[0] - goal[0]) + abs(report[1] - goal[1])
    closeness = max(0.0, 1.0 - error / (2 * (config.size - 1)))
    return {"team": float(error == 0), "local": config.closeness_coef * closeness, "format": 0.0}


def walk_terms(config: SplitNavConfig, env: PlanPathEnv, moves: list[str] | None) -> dict[str, float]:
    """Step `env` with the walk. team: 1 when the walk *ends* on G (a walk that passes G and goes on is
    refused, so sweeping the grid scores nothing); local: progress towards G of a walk with no invalid
    move and no overshoot; format: the penalty for a malformed walk (which forfeits the episode)."""
    if moves is None:
        env.forfeit()
        return {"team": 0.0, "local": 0.0, "format": -config.format_penalty}
    before = env.distance()
    result = env.step(moves)
    clean = "invalid_at" not in result.info and result.info.get("ignored", 0) == 0
    progress = max(0, before - env.distance()) / max(before, 1) if clean else 0.0
    return {"team": float(clean and env.success), "local": config.progress_coef * progress, "format": 0.0}


def render_map(layout: Layout, show_start: bool, show_goal: bool) -> str:
    """The grid rows with S and/or G drawn."""
    grid, start, goal = layout
    rows = [list(row) for row in grid]
    if show_goal:
        rows[goal[0]][goal[1]] = "G"
    if show_start:
        rows[start[0]][start[1]] = "S"
    return "\n".join("".join(row) for row in rows)


__all__ = ["MOVES", "SplitNavConfig", "instance", "make_env", "parse_cell", "parse_walk", "render_map",
           "spotter_terms", "walk_terms"]
