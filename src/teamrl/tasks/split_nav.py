"""Split-Nav: a two-role grid navigation task where each role sees half of the state.

The *spotter* sees where the goal is from the walker's start (an egocentric window centred on the
start, `render_radar`), but not the walls; it reports the goal's offset from the start, vertical
part first, e.g. `D2L2` (two rows down, two columns left). The *walker* sees the map with the walls and its start S (not the goal) and the
spotter's report, and answers a walk of U/D/L/R letters that must end on the goal. Neither can solve
the task alone: without the report the walker does not know where to go, and the spotter cannot
move or see the walls. A single agent that sees everything (the single-agent baseline) must do both
jobs in one answer: turn two coordinates into a walk around the walls.

Why an offset: the first version had the spotter report the goal's cell (`31`) and left the walker
to turn two coordinates into a walk; the warmed-up tiny walker did so 7.5% of the time
(docs/study/split_nav.md). An offset is what the walker can copy (`D2L2` -> `DDLL`), choosing the
order itself where a wall blocks the straight way.

Instances are procedural Plan-Path grids (solvable by construction) split into train / validation /
test by content (`teamrl.tasks.content_splits`), so no grid is shared between splits.

Verifiers are strict on purpose (an adversary's target): a report is exactly one offset of at most
one vertical and one horizontal part, each 1..N-1 cells; a walk is only U/D/L/R letters, at most the
move budget, and it must stop on the goal (a walk that passes the goal and goes on is refused).
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
Offset = tuple[int, int]  # (rows down, columns right); negative = up / left

_OFFSET_RE = re.compile(r"(?:([UD])([1-9]))? ?(?:([LR])([1-9]))?")
_WALK_RE = re.compile(r"[UDLR]+")


@dataclass(frozen=True)
class SplitNavConfig:
    """Split-Nav grid settings, reward magnitudes and which split 'heldout' means."""

    size: int = 4
    """Grid side length N (N x N cells, at most 10 so an offset part is one digit)."""
    wall_prob: float = 0.1
    """Probability that a cell is a wall (S and G are never walls). Walls are what only the walker
    sees: where one blocks the straight way, the walker must choose another order of moves."""
    min_distance: int = 2
    """Shortest S-G path length of every instance at least."""
    progress_coef: float = 0.5
    """Walker's local reward: this when its walk (with no invalid move) ends on the cell the report
    names, right or wrong (faithfulness to the report, as Split-Calc's calculator)."""
    closeness_coef: float = 0.5
    """Spotter's local reward: this times 1 - (Manhattan error of the cell its offset names) / (2 (N - 1))."""
    format_penalty: float = 0.1
    """Subtracted from an answer that is malformed (empty, several offsets, letters other than UDLR, too long)."""
    heldout_split: str = "validation"
    """Which split the framework's held-out evaluation plays: validation (checkpoint picking) or test."""

    def __post_init__(self) -> None:
        if not 3 <= self.size <= 10:
            raise ValueError(f"split_nav.size must be between 3 and 10 (an offset part is one digit), got {self.size}")
        if not 0.0 <= self.wall_prob < 0.5:
            raise ValueError(f"split_nav.wall_prob must be in [0, 0.5), got {self.wall_prob}")
        if not 1 <= self.min_distance <= 2 * (self.size - 1):
            raise ValueError(
                f"split_nav.min_distance must be in [1, {2 * (self.size - 1)}] for size "
                f"{self.size}, got {self.min_distance}"
            )
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


def offset_of(start: Cell, goal: Cell) -> Offset:
    """(rows down, columns right) from `start` to `goal`."""
    return goal[0] - start[0], goal[1] - start[1]


def format_offset(offset: Offset) -> str:
    """The report for an offset: vertical part first, a zero part left out.

    >>> format_offset((2, -2)), format_offset((0, 3)), format_offset((-1, 0))
    ('D2L2', 'R3', 'U1')
    """
    rows, cols = offset
    vertical = f"{'D' if rows > 0 else 'U'}{abs(rows)}" if rows else ""
    horizontal = f"{'R' if cols > 0 else 'L'}{abs(cols)}" if cols else ""
    return vertical + horizontal


def parse_offset(text: str, size: int) -> Offset | None:
    """The one offset a report names ('D2L2', 'D2 L2', 'R3'), or None: anything else, a part of N or
    more cells, or no part at all.

    >>> parse_offset("D2L2", 5), parse_offset("U1", 5), parse_offset("D2L2 D2L2", 5), parse_offset("D7", 5)
    ((2, -2), (-1, 0), None, None)
    """
    match = _OFFSET_RE.fullmatch(text.strip())
    if match is None or not (match.group(1) or match.group(3)):
        return None
    rows = int(match.group(2) or 0) * (1 if match.group(1) == "D" else -1)
    cols = int(match.group(4) or 0) * (1 if match.group(3) == "R" else -1)
    return (rows, cols) if max(abs(rows), abs(cols)) < size else None


def target_of(start: Cell, offset: Offset | None, size: int) -> Cell | None:
    """The cell an offset names from `start`, or None (no offset, or off the grid)."""
    if offset is None:
        return None
    cell = (start[0] + offset[0], start[1] + offset[1])
    return cell if 0 <= cell[0] < size and 0 <= cell[1] < size else None


def parse_walk(text: str, budget: int) -> list[str] | None:
    """The moves of a walk: only the letters U, D, L, R (no spaces), 1..budget of them; else None.

    >>> parse_walk("RRD", 20), parse_walk("go right", 20), parse_walk("R" * 21, 20)
    (['R', 'R', 'D'], None, None)
    """
    text = text.strip()
    if not _WALK_RE.fullmatch(text) or len(text) > budget:
        return None
    return list(text)


def spotter_terms(config: SplitNavConfig, layout: Layout, report: Offset | None) -> dict[str, float]:
    """team: 1 when the report is the goal's offset; local: closeness of the cell a well-formed report
    names; format: the penalty when there is no well-formed report."""
    if report is None:
        return {"team": 0.0, "local": 0.0, "format": -config.format_penalty}
    true = offset_of(layout[1], layout[2])
    error = abs(report[0] - true[0]) + abs(report[1] - true[1])
    closeness = max(0.0, 1.0 - error / (2 * (config.size - 1)))
    return {"team": float(error == 0), "local": config.closeness_coef * closeness, "format": 0.0}


def walk_terms(
    config: SplitNavConfig, env: PlanPathEnv, moves: list[str] | None, target: Cell | None
) -> dict[str, float]:
    """Step `env` with the walk. team: 1 when the walk *ends* on G (a walk that passes G and goes on is
    refused, so sweeping the grid scores nothing); local: `progress_coef` when a walk with no invalid
    move ends on `target`, the cell the report names; format: the penalty for a malformed walk (which
    forfeits the episode)."""
    if moves is None:
        env.forfeit()
        return {"team": 0.0, "local": 0.0, "format": -config.format_penalty}
    result = env.step(moves)
    clean = "invalid_at" not in result.info and result.info.get("ignored", 0) == 0
    faithful = clean and target is not None and env.position == target
    return {"team": float(clean and env.success), "local": config.progress_coef * faithful, "format": 0.0}


def render_radar(layout: Layout, size: int) -> str:
    """The goal as seen from the start: a (2N - 1) x (2N - 1) window centred on S, G drawn at its offset,
    every other cell '.' (no walls: those are the walker's half of the state).

    The window is egocentric so that reading the offset is finding G, the skill the tiny model learned
    on the first version's map (a report of G's cell), not subtracting two coordinates, which it did not.

    >>> render_radar((("...", "...", "..."), (1, 1), (2, 0)), 3).split("\\n")
    ['.....', '.....', '..S..', '.G...', '.....']
    """
    (sr, sc), (gr, gc) = layout[1], layout[2]
    span = range(-(size - 1), size)
    cells = {(0, 0): "S", (gr - sr, gc - sc): "G"}
    return "\n".join("".join(cells.get((dr, dc), ".") for dc in span) for dr in span)


def render_map(layout: Layout, show_start: bool, show_goal: bool) -> str:
    """The grid rows with S and/or G drawn."""
    grid, start, goal = layout
    rows = [list(row) for row in grid]
    if show_goal:
        rows[goal[0]][goal[1]] = "G"
    if show_start:
        rows[start[0]][start[1]] = "S"
    return "\n".join("".join(row) for row in rows)


__all__ = [
    "MOVES",
    "Offset",
    "SplitNavConfig",
    "format_offset",
    "instance",
    "make_env",
    "offset_of",
    "parse_offset",
    "parse_walk",
    "render_map",
    "render_radar",
    "spotter_terms",
    "target_of",
    "walk_terms",
]
