"""Sokoban: push every box onto a target on a small walled grid.

Instances are solvable by construction: a room is carved, boxes are placed on their targets, and
the player then plays the game *backwards* (walking, and sometimes pulling a box behind it) for a
seed-dependent number of steps. Every backward step is the exact reverse of a legal forward move,
so replaying the reversed walk solves the instance (generation and search: `teamrl.tasks.sokoban_rooms`).

`render()` legend (also exported as `LEGEND`)::

    #  wall             .  floor
    x  empty target     $  box (off target)     *  box on a target
    @  player           +  player standing on an empty target

The action is a list of canonical moves ("U", "D", "L", "R"). A move into a wall, or a push of a
box into a wall or another box, is invalid: it is not executed and the episode ends.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

from teamrl.tasks.base import HELD_OUT_SEED_OFFSET, StepResult, split_seed
from teamrl.tasks.sokoban_rooms import (
    LEGEND,
    MOVES,
    Layout,
    SokobanConfig,
    dead_cells,
    generate_layout,
    heldout_layouts,
    neighbour_deltas,
    shortest_solution,
)

__all__ = [
    "LEGEND",
    "MOVES",
    "Layout",
    "SokobanConfig",
    "SokobanEnv",
    "generate_layout",
    "heldout_layouts",
    "instance",
    "solve",
]


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
            for d in neighbour_deltas(layout.size):
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
        return self.success or self.hit_invalid or self.steps_taken >= self.config.step_budget

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
        d = neighbour_deltas(layout.size)[MOVES.index(symbol)]
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
            raise TypeError(f"sokoban action must be a list of moves {list(MOVES)}, got {type(action).__name__}")
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
    return shortest_solution(
        layout.size,
        layout.walls,
        layout.targets,
        env.boxes,
        env.player,
        max_states=max_states,
        dead=dead_cells(layout.size, layout.walls, layout.targets),
    )


def instance(split: str, index: int, config: SokobanConfig | None = None) -> SokobanEnv:
    """Instance `index` of a split ('train' or 'heldout'), reset and ready."""
    env = SokobanEnv(config)
    env.reset(split_seed(split, index))
    return env
