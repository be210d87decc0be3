"""Sokoban rooms: generation settings, layouts solvable by construction, and the solver's search.

A room is carved, boxes are placed on their targets, and the player plays the game *backwards*
(walking, and sometimes pulling a box behind it); every backward step reverses a legal forward move,
so the instance is solvable. `shortest_solution` is the breadth-first search (with dead-cell pruning)
that checks the minimum solution length here and solves an environment in `teamrl.tasks.sokoban`.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from teamrl.tasks.base import check_puzzle_settings, split_seed

MOVES: tuple[str, ...] = ("U", "D", "L", "R")
LEGEND = "# wall, . floor, x empty target, $ box, * box on a target, @ player, + player on an empty target"

_PULL_PROB = 0.75
"""Chance that a backward step pulls a box, when the player stands next to one it can pull."""


@dataclass(frozen=True)
class SokobanConfig:
    """Room generation settings and the shaped reward's terms."""

    size: int = 6
    """Side of the square grid, outer wall ring included (the playable interior is size-2)."""
    num_boxes: int = 1
    """Number of boxes, and of targets."""
    wall_prob: float = 0.15
    """Probability that an interior cell is a wall (only the largest open region is kept)."""
    scramble_min: int = 10
    """Fewest backward (reverse-play) steps used to scatter the boxes from their targets."""
    scramble_max: int = 40
    """Most backward steps; the count per instance is drawn from [scramble_min, scramble_max]."""
    min_solution_moves: int = 4
    """Starts solvable in fewer moves than this are rejected as trivial (exact check)."""
    max_steps: int = 0
    """Move budget per episode; 0 means 10 * size."""
    step_cost: float = 0.01
    """Subtracted per executed move."""
    invalid_penalty: float = 0.5
    """Subtracted for an invalid move (the episode then ends)."""
    progress_coef: float = 0.5
    """Times the decrease of the box-to-target distance, divided by the start distance."""
    goal_bonus: float = 1.0
    """Added when every box is on a target (the episode then ends)."""
    heldout_instances: int = 200
    """How many held-out layouts the training split must avoid."""
    max_attempts: int = 2000
    """Generation tries per seed before giving up with an error."""

    def __post_init__(self) -> None:
        if not 5 <= self.size <= 16:
            raise ValueError(f"sokoban.size must be between 5 and 16, got {self.size}")
        interior = (self.size - 2) ** 2
        if self.num_boxes < 1:
            raise ValueError(f"sokoban.num_boxes must be >= 1, got {self.num_boxes}")
        if 2 * self.num_boxes + 2 > interior:
            raise ValueError(
                f"sokoban.num_boxes={self.num_boxes} does not fit a {self.size}x{self.size} room "
                f"({interior} interior cells; need at least 2*num_boxes+2)"
            )
        if not 0.0 <= self.wall_prob < 0.5:
            raise ValueError(f"sokoban.wall_prob must be in [0, 0.5), got {self.wall_prob}")
        if self.scramble_min < 1:
            raise ValueError(f"sokoban.scramble_min must be >= 1, got {self.scramble_min}")
        if self.scramble_max < self.scramble_min:
            raise ValueError(
                f"sokoban.scramble_max must be >= scramble_min ({self.scramble_min}), got {self.scramble_max}"
            )
        if self.min_solution_moves < 1:
            raise ValueError(f"sokoban.min_solution_moves must be >= 1, got {self.min_solution_moves}")
        check_puzzle_settings(self, "sokoban")

    @property
    def step_budget(self) -> int:
        """The move budget actually used (max_steps, or its default)."""
        return self.max_steps or 10 * self.size

    def generation_key(self) -> tuple:
        """The fields that decide which layout a seed produces (reward terms excluded)."""
        return (
            self.size,
            self.num_boxes,
            self.wall_prob,
            self.scramble_min,
            self.scramble_max,
            self.min_solution_moves,
            self.max_attempts,
        )


@dataclass(frozen=True)
class Layout:
    """A start position. Cells are flat indices r * size + c (the outer ring is always wall)."""

    size: int
    walls: frozenset[int]
    targets: frozenset[int]
    boxes: frozenset[int]
    player: int

    @classmethod
    def from_text(cls, text: str) -> Layout:
        """Parse a room drawn with the `render()` legend (a square, walled all round).

        Meant for hand-made rooms (tests, examples); raises ValueError on anything malformed.
        """
        rows = [row for row in text.strip().splitlines()]
        n = len(rows)
        if n < 3 or any(len(row) != n for row in rows):
            raise ValueError(f"sokoban room must be a square of at least 3x3, got rows {rows}")
        walls, targets, boxes, players = set(), set(), set(), []
        for r, row in enumerate(rows):
            for c, ch in enumerate(row):
                cell = r * n + c
                border = r in (0, n - 1) or c in (0, n - 1)
                if ch not in "#.x$*@+":
                    raise ValueError(f"unknown sokoban character {ch!r} at ({r}, {c}); {LEGEND}")
                if border and ch != "#":
                    raise ValueError(f"sokoban room border must be wall, got {ch!r} at ({r}, {c})")
                if ch == "#":
                    walls.add(cell)
                if ch in "x*+":
                    targets.add(cell)
                if ch in "$*":
                    boxes.add(cell)
                if ch in "@+":
                    players.append(cell)
        if len(players) != 1:
            raise ValueError(f"sokoban room needs exactly one player, found {len(players)}")
        if not boxes or len(boxes) != len(targets):
            raise ValueError(
                f"sokoban room needs as many boxes as targets (>= 1), got {len(boxes)} boxes and {len(targets)} targets"
            )
        return cls(n, frozenset(walls), frozenset(targets), frozenset(boxes), players[0])


def neighbour_deltas(size: int) -> tuple[int, ...]:
    """Flat-index offsets of U, D, L, R (the wall ring means no bounds checks are needed)."""
    return (-size, size, -1, 1)


def _largest_region(cells: set[int], size: int) -> set[int]:
    """The largest 4-connected subset of `cells` (ties: the one holding the smallest cell)."""
    seen: set[int] = set()
    best: set[int] = set()
    for start in sorted(cells):
        if start in seen:
            continue
        region = {start}
        queue = deque([start])
        while queue:
            cell = queue.popleft()
            for d in neighbour_deltas(size):
                nxt = cell + d
                if nxt in cells and nxt not in region:
                    region.add(nxt)
                    queue.append(nxt)
        seen |= region
        if len(region) > len(best):
            best = region
    return best


def shortest_solution(
    size: int,
    walls: frozenset[int],
    targets: frozenset[int],
    boxes: frozenset[int],
    player: int,
    *,
    max_depth: int | None = None,
    max_states: int = 200_000,
    dead: frozenset[int] = frozenset(),
) -> list[str] | None:
    """Shortest move sequence solving the position, by BFS over (player, boxes) states.

    Returns None when unsolvable within `max_depth` moves or `max_states` visited states. Boxes
    are never pushed onto `dead` cells (non-target cells from which no box can be recovered).
    """
    if boxes == targets:
        return []
    deltas = neighbour_deltas(size)
    start = (player, boxes)
    parent: dict[tuple[int, frozenset[int]], tuple[tuple[int, frozenset[int]], str] | None]
    parent = {start: None}
    queue = deque([(start, 0)])
    while queue:
        state, depth = queue.popleft()
        if max_depth is not None and depth >= max_depth:
            continue
        pos, bx = state
        for sym, d in zip(MOVES, deltas):
            nxt = pos + d
            if nxt in walls:
                continue
            if nxt in bx:
                dest = nxt + d
                if dest in walls or dest in bx or dest in dead:
                    continue
                new_boxes = (bx - {nxt}) | {dest}
            else:
                new_boxes = bx
            new_state = (nxt, new_boxes)
            if new_state in parent:
                continue
            parent[new_state] = (state, sym)
            if new_boxes == targets:
                moves: list[str] = []
                cur: tuple[int, frozenset[int]] = new_state
                while (link := parent[cur]) is not None:
                    cur, move = link
                    moves.append(move)
                return moves[::-1]
            if len(parent) > max_states:
                return None
            queue.append((new_state, depth + 1))
    return None


def dead_cells(size: int, walls: frozenset[int], targets: frozenset[int]) -> frozenset[int]:
    """Non-target floor cells in a corner: a box pushed there can never move again."""
    up, down, left, right = neighbour_deltas(size)
    dead = set()
    for cell in range(size * size):
        if cell in walls or cell in targets:
            continue
        vertical = cell + up in walls or cell + down in walls
        horizontal = cell + left in walls or cell + right in walls
        if vertical and horizontal:
            dead.add(cell)
    return frozenset(dead)


def _try_layout(config: SokobanConfig, rng: random.Random) -> Layout | None:
    """One generation attempt; None when the room or the scramble is unusable."""
    n = config.size
    interior = [r * n + c for r in range(1, n - 1) for c in range(1, n - 1)]
    floor = _largest_region({c for c in interior if rng.random() >= config.wall_prob}, n)
    if len(floor) < 2 * config.num_boxes + 2:
        return None
    picks = rng.sample(sorted(floor), config.num_boxes + 1)
    targets = frozenset(picks[:-1])
    player = picks[-1]
    boxes = set(targets)
    # Reverse play: the player steps to a free cell; the box right behind it may follow (a pull).
    for _ in range(rng.randint(config.scramble_min, config.scramble_max)):
        options = [d for d in neighbour_deltas(n) if player + d in floor and player + d not in boxes]
        if not options:
            break
        # Pulls are favoured: an unbiased walk mostly wanders and leaves boxes near targets.
        pulls = [d for d in options if player - d in boxes]
        if pulls and rng.random() < _PULL_PROB:
            d = rng.choice(pulls)
            boxes.remove(player - d)
            boxes.add(player)
        else:
            d = rng.choice(options)
        player += d
    start_boxes = frozenset(boxes)
    walls = frozenset(range(n * n)) - floor
    if start_boxes == targets:
        return None
    if (
        config.min_solution_moves > 1
        and shortest_solution(n, walls, targets, start_boxes, player, max_depth=config.min_solution_moves - 1)
        is not None
    ):
        return None  # trivially short
    return Layout(n, walls, targets, start_boxes, player)


def generate_layout(config: SokobanConfig, seed: int, avoid: frozenset[Layout] = frozenset()) -> Layout:
    """The layout for `seed`: the first generated candidate that is usable and not in `avoid`."""
    rng = random.Random(seed)  # built here, never stored, so environments stay cheap to copy
    for _ in range(config.max_attempts):
        layout = _try_layout(config, rng)
        if layout is not None and layout not in avoid:
            return layout
    raise RuntimeError(
        f"sokoban: no usable layout for seed {seed} after {config.max_attempts} attempts "
        f"(size={config.size}, num_boxes={config.num_boxes}, wall_prob={config.wall_prob}); "
        "lower wall_prob or num_boxes, or raise max_attempts"
    )


_HELDOUT_CACHE: dict[tuple, frozenset[Layout]] = {}


def heldout_layouts(config: SokobanConfig) -> frozenset[Layout]:
    """The first `config.heldout_instances` held-out layouts (cached per generation settings)."""
    key = (config.generation_key(), config.heldout_instances)
    if key not in _HELDOUT_CACHE:
        _HELDOUT_CACHE[key] = frozenset(
            generate_layout(config, split_seed("heldout", i)) for i in range(config.heldout_instances)
        )
    return _HELDOUT_CACHE[key]
