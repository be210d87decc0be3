"""Sokoban: push every box onto a target on a small walled grid.

Instances are solvable by construction: a room is carved, boxes are placed on their targets, and
the player then plays the game *backwards* (walking, and sometimes pulling a box behind it) for a
seed-dependent number of steps. Every backward step is the exact reverse of a legal forward move,
so replaying the reversed walk solves the instance.

`render()` legend (also exported as `LEGEND`)::

    #  wall             .  floor
    x  empty target     $  box (off target)     *  box on a target
    @  player           +  player standing on an empty target

The action is a list of canonical moves ("U", "D", "L", "R"). A move into a wall, or a push of a
box into a wall or another box, is invalid: it is not executed and the episode ends.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from teamrl.tasks.base import HELD_OUT_SEED_OFFSET, StepResult, split_seed

MOVES: tuple[str, ...] = ("U", "D", "L", "R")
LEGEND = (
    "# wall, . floor, x empty target, $ box, * box on a target, @ player, "
    "+ player on an empty target"
)
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
                f"sokoban.scramble_max must be >= scramble_min ({self.scramble_min}), "
                f"got {self.scramble_max}"
            )
        if self.min_solution_moves < 1:
            raise ValueError(
                f"sokoban.min_solution_moves must be >= 1, got {self.min_solution_moves}"
            )
        if self.max_steps < 0:
            raise ValueError(f"sokoban.max_steps must be >= 0, got {self.max_steps}")
        for name in ("step_cost", "invalid_penalty", "progress_coef", "goal_bonus"):
            value = getattr(self, name)
            if value < 0:
                raise ValueError(f"sokoban.{name} must be >= 0 (it is a magnitude), got {value}")
        if self.heldout_instances < 0:
            raise ValueError(
                f"sokoban.heldout_instances must be >= 0, got {self.heldout_instances}"
            )
        if self.max_attempts < 1:
            raise ValueError(f"sokoban.max_attempts must be >= 1, got {self.max_attempts}")

    @property
    def step_budget(self) -> int:
        """The move budget actually used (max_steps, or its default)."""
        return self.max_steps or 10 * self.size

    def generation_key(self) -> tuple:
        """The fields that decide which layout a seed produces (reward terms excluded)."""
        return (self.size, self.num_boxes, self.wall_prob, self.scramble_min,
                self.scramble_max, self.min_solution_moves, self.max_attempts)


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
                f"sokoban room needs as many boxes as targets (>= 1), "
                f"got {len(boxes)} boxes and {len(targets)} targets"
            )
        return cls(n, frozenset(walls), frozenset(targets), frozenset(boxes), players[0])


def _deltas(size: int) -> tuple[int, ...]:
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
            for d in _deltas(size):
                nxt = cell + d
                if nxt in cells and nxt not in region:
                    region.add(nxt)
                    queue.append(nxt)
        seen |= region
        if len(region) > len(best):
            best = region
    return best


def _search(
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
    deltas = _deltas(size)
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


def _dead_cells(size: int, walls: frozenset[int], targets: frozenset[int]) -> frozenset[int]:
    """Non-target floor cells in a corner: a box pushed there can never move again."""
    up, down, left, right = _deltas(size)
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
        options = [d for d in _deltas(n) if player + d in floor and player + d not in boxes]
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
    if config.min_solution_moves > 1 and _search(
        n, walls, targets, start_boxes, player, max_depth=config.min_solution_moves - 1
    ) is not None:
        return None  # trivially short
    return Layout(n, walls, targets, start_boxes, player)


def generate_layout(
    config: SokobanConfig, seed: int, avoid: frozenset[Layout] = frozenset()
) -> Layout:
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
            generate_layout(config, split_seed("heldout", i))
            for i in range(config.heldout_instances)
        )
    return _HELDOUT_CACHE[key]


class SokobanEnv:
    """One Sokoban instance. The action is a list of moves ("U", "D", "L", "R").

    All state lives in immutable values (frozensets, ints, a frozen config) that `step` replaces
    rather than mutates, so `copy.deepcopy` is a cheap shallow copy (see `__deepcopy__`).
    """

    def __init__(self, config: SokobanConfig | None = None) -> None:
        if config is not None and not isinstance(config, SokobanConfig):
            raise TypeError(f"SokobanEnv needs a SokobanConfig, got {type(config).__name__}")
        self.config = config or SokobanConfig()
        self.seed: int | None = None
        self.layout: Layout | None = None
        self.boxes: frozenset[int] = frozenset()
        self.player = -1
        self.steps_taken = 0
        self.hit_invalid = False
        self._dist: tuple[tuple[int, ...], ...] = ()  # per target: BFS distance of every cell
        self._start_distance = 1

    def __deepcopy__(self, memo: dict) -> SokobanEnv:
        # Every attribute is immutable and replaced (never mutated) by step(), so sharing is safe.
        clone = object.__new__(SokobanEnv)
        clone.__dict__.update(self.__dict__)
        memo[id(self)] = clone
        return clone

    def reset(self, seed: int) -> None:
        """Build the instance for `seed`; training seeds skip layouts of the held-out set."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        training = seed < HELD_OUT_SEED_OFFSET
        avoid = heldout_layouts(self.config) if training else frozenset()
        self.load(generate_layout(self.config, seed, avoid))
        self.seed = seed

    def load(self, layout: Layout) -> None:
        """Start a fresh episode on a given layout (e.g. a hand-made `Layout.from_text` room).

        The layout's size may differ from `config.size`; the budget still comes from the config.
        """
        if not isinstance(layout, Layout):
            raise TypeError(f"load needs a Layout, got {type(layout).__name__}")
        self.seed = None
        self.layout = layout
        self.boxes = layout.boxes
        self.player = layout.player
        self.steps_taken = 0
        self.hit_invalid = False
        self._dist = tuple(self._distances_from(t) for t in sorted(layout.targets))
        self._start_distance = max(self.distance(), 1)

    def _distances_from(self, target: int) -> tuple[int, ...]:
        """Walking distance (boxes ignored) from `target` to every cell; walls get a large value."""
        layout = self._require_layout()
        far = 4 * layout.size * layout.size
        dist = [far] * (layout.size * layout.size)
        dist[target] = 0
        queue = deque([target])
        while queue:
            cell = queue.popleft()
            for d in _deltas(layout.size):
                nxt = cell + d
                if nxt not in layout.walls and dist[nxt] == far:
                    dist[nxt] = dist[cell] + 1
                    queue.append(nxt)
        return tuple(dist)

    def _require_layout(self) -> Layout:
        if self.layout is None:
            raise RuntimeError("SokobanEnv has no instance yet: call reset(seed) first")
        return self.layout

    @property
    def success(self) -> bool:
        return self.layout is not None and self.boxes == self.layout.targets

    @property
    def done(self) -> bool:
        return (
            self.success or self.hit_invalid or self.steps_taken >= self.config.step_budget
        )

    def forfeit(self) -> StepResult:
        """End the episode as failed with the invalid-move penalty (for a plan that parses to nothing),
        so that saying nothing is never cheaper than a move that might be invalid."""
        self.hit_invalid = True
        penalty = -self.config.invalid_penalty
        return StepResult(reward=penalty, done=True, terms={"invalid": penalty}, info={"executed": 0})

    def distance(self) -> int:
        """Sum over boxes of the distance to a target, matching boxes to targets greedily."""
        self._require_layout()
        pairs = sorted((dist[b], b, t) for t, dist in enumerate(self._dist) for b in self.boxes)
        used_boxes: set[int] = set()
        used_targets: set[int] = set()
        total = 0
        for d, b, t in pairs:
            if b not in used_boxes and t not in used_targets:
                used_boxes.add(b)
                used_targets.add(t)
                total += d
        return total

    def _move(self, symbol: str) -> str | None:
        """Apply one move; returns why it is invalid (state untouched), or None once applied."""
        layout = self._require_layout()
        d = _deltas(layout.size)[MOVES.index(symbol)]
        nxt = self.player + d
        if nxt in layout.walls:
            return "walked into a wall"
        if nxt in self.boxes:
            dest = nxt + d
            if dest in layout.walls:
                return "pushed a box into a wall"
            if dest in self.boxes:
                return "pushed a box into another box"
            self.boxes = (self.boxes - {nxt}) | {dest}
        self.player = nxt
        return None

    def step(self, action: Sequence[str]) -> StepResult:
        """Execute moves in order; stop at the first invalid move, the goal, or the budget.

        info: "executed" (moves applied), "ignored" (moves left unread after the episode ended),
        and on an invalid move "invalid_at" (its 0-based index in `action`) and "reason".
        """
        self._require_layout()
        if isinstance(action, str) or not isinstance(action, (list, tuple)):
            raise TypeError(
                f"sokoban action must be a list of moves {list(MOVES)}, "
                f"got {type(action).__name__}"
            )
        unknown = [m for m in action if m not in MOVES]
        if unknown:
            raise ValueError(f"unknown move {unknown[0]!r}: moves are {list(MOVES)}")
        if self.done:
            raise RuntimeError("the episode is over: call reset(seed) before stepping again")
        cfg = self.config
        terms = {"step_cost": 0.0, "invalid": 0.0, "progress": 0.0, "goal": 0.0}
        info: dict[str, object] = {}
        before = self.distance()
        executed = 0
        for index, move in enumerate(action):
            if self.done:
                break
            reason = self._move(move)
            if reason is not None:
                self.hit_invalid = True
                terms["invalid"] -= cfg.invalid_penalty
                info["invalid_at"] = index
                info["reason"] = f"move {move!r} {reason}"
                break
            executed += 1
            self.steps_taken += 1
        terms["step_cost"] = -cfg.step_cost * executed if executed else 0.0
        terms["progress"] = cfg.progress_coef * (before - self.distance()) / self._start_distance
        if self.success:
            terms["goal"] = cfg.goal_bonus
        elif self.steps_taken >= cfg.step_budget:
            info["budget_exhausted"] = True
        info["executed"] = executed
        info["ignored"] = len(action) - executed - (1 if self.hit_invalid else 0)
        return StepResult(reward=sum(terms.values()), done=self.done, terms=terms, info=info)

    def render(self) -> str:
        """The room as rows of characters (legend in the module docstring and `LEGEND`)."""
        layout = self._require_layout()
        n = layout.size
        rows = []
        for r in range(n):
            chars = []
            for c in range(n):
                cell = r * n + c
                target = cell in layout.targets
                if cell in layout.walls:
                    chars.append("#")
                elif cell == self.player:
                    chars.append("+" if target else "@")
                elif cell in self.boxes:
                    chars.append("*" if target else "$")
                else:
                    chars.append("x" if target else ".")
            rows.append("".join(chars))
        return "\n".join(rows)

    @property
    def player_cell(self) -> tuple[int, int]:
        """The player's (row, col)."""
        return divmod(self.player, self._require_layout().size)

    @property
    def box_cells(self) -> list[tuple[int, int]]:
        """The boxes' (row, col) cells, sorted."""
        n = self._require_layout().size
        return sorted(divmod(b, n) for b in self.boxes)

    @property
    def target_cells(self) -> list[tuple[int, int]]:
        """The targets' (row, col) cells, sorted."""
        layout = self._require_layout()
        return sorted(divmod(t, layout.size) for t in layout.targets)


def solve(env: SokobanEnv, max_states: int = 200_000) -> list[str] | None:
    """A shortest move list solving `env` from its current state, or None.

    None means unsolvable from here (e.g. a box was pushed into a corner) or that the BFS gave
    up after `max_states` states. The environment itself is not changed.
    """
    layout = env._require_layout()
    return _search(
        layout.size, layout.walls, layout.targets, env.boxes, env.player,
        max_states=max_states, dead=_dead_cells(layout.size, layout.walls, layout.targets),
    )


def instance(split: str, index: int, config: SokobanConfig | None = None) -> SokobanEnv:
    """Instance `index` of a split ('train' or 'heldout'), reset and ready."""
    env = SokobanEnv(config)
    env.reset(split_seed(split, index))
    return env
