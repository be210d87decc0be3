"""Plan-Path: walk from S to G on a grid with walls.

Grids are solvable by construction (a generated grid is kept only if G is reachable from S), and
the held-out split is disjoint from the training split by content, not only by seed.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

from teamrl.tasks.base import StepResult, split_seed
from teamrl.tasks.content_splits import check_heldout_split

MOVES: dict[str, tuple[int, int]] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
WALL, FREE = "#", "."

Cell = tuple[int, int]


@dataclass(frozen=True)
class PlanPathConfig:
    """Grid world settings and the shaped reward's terms."""

    size: int = 6
    """Grid side length N (N x N cells)."""
    wall_prob: float = 0.25
    """Probability that a cell is a wall (S and G are never walls)."""
    min_distance: int = 1
    """Shortest S-G path length a generated instance must have at least."""
    max_steps: int = 0
    """Move budget per episode; 0 means 4 * size."""
    step_cost: float = 0.02
    """Subtracted per executed move."""
    invalid_penalty: float = 0.5
    """Subtracted for a move into a wall or off the grid (the episode then ends)."""
    progress_coef: float = 0.5
    """Times the decrease of the shortest-path distance to G, divided by the start distance."""
    goal_bonus: float = 1.0
    """Added when G is reached (the episode then ends)."""
    heldout_instances: int = 200
    """How many held-out grids the training split must avoid."""
    heldout_split: str = ""
    """What 'heldout' means: '' the whole held-out list (`heldout_instances` grids), 'validation' its first
    half or 'test' its second half less any grid the first half also holds, so a study picks checkpoints
    on one and reports the other and the two share no grid (training avoids both already)."""
    worked_examples: bool = False
    """Chat prompts show two solved 4x4 grids (`teamrl.workflows.plan_path_team.EXAMPLE_GRIDS`, never an
    instance of a larger task) as earlier turns before the agent's grid: the tool's program, the plan's
    `follow` or written moves. Without them SmolLM2-135M-Instruct and Gemma-3-270M scored 0% on the 6x6
    team task (docs/howto/real-models.md, base rates)."""

    def __post_init__(self) -> None:
        if not 3 <= self.size <= 20:
            raise ValueError(f"plan_path.size must be between 3 and 20, got {self.size}")
        if not 0.0 <= self.wall_prob < 0.6:
            raise ValueError(f"plan_path.wall_prob must be in [0, 0.6), got {self.wall_prob}")
        if self.min_distance < 1:
            raise ValueError(f"plan_path.min_distance must be >= 1, got {self.min_distance}")
        if self.max_steps < 0:
            raise ValueError(f"plan_path.max_steps must be >= 0, got {self.max_steps}")
        if self.heldout_split:
            check_heldout_split("plan_path", self.heldout_split)

    @property
    def step_budget(self) -> int:
        return self.max_steps or 4 * self.size


def bfs_path(grid: list[str], start: Cell, goal: Cell) -> str | None:
    """Shortest path from start to goal as a move string ('RRD'), or None if unreachable.

    Neighbours are expanded in U, D, L, R order, so the result is deterministic.
    """
    rows, cols = len(grid), len(grid[0])
    parent: dict[Cell, tuple[Cell, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            moves = []
            while parent[cell] is not None:
                cell, move = parent[cell]  # type: ignore[misc]
                moves.append(move)
            return "".join(reversed(moves))
        for move, (dr, dc) in MOVES.items():
            r, c = cell[0] + dr, cell[1] + dc
            if 0 <= r < rows and 0 <= c < cols and grid[r][c] != WALL and (r, c) not in parent:
                parent[(r, c)] = (cell, move)
                queue.append((r, c))
    return None


def distances_to(grid: list[str], goal: Cell) -> dict[Cell, int]:
    """Shortest-path distance from every reachable cell to `goal`."""
    dist = {goal: 0}
    queue = deque([goal])
    while queue:
        r, c = queue.popleft()
        for dr, dc in MOVES.values():
            nr, nc = r + dr, c + dc
            if 0 <= nr < len(grid) and 0 <= nc < len(grid[0]) and grid[nr][nc] != WALL and (nr, nc) not in dist:
                dist[(nr, nc)] = dist[(r, c)] + 1
                queue.append((nr, nc))
    return dist


def generate_grid(config: PlanPathConfig, seed: int) -> tuple[tuple[str, ...], Cell, Cell]:
    """A solvable grid (rows of '#'/'.'), start and goal for `seed`."""
    rng = random.Random(seed)
    n = config.size
    while True:
        cells = [(r, c) for r in range(n) for c in range(n)]
        start, goal = rng.sample(cells, 2)
        rows = [
            "".join(WALL if (r, c) not in (start, goal) and rng.random() < config.wall_prob else FREE for c in range(n))
            for r in range(n)
        ]
        path = bfs_path(rows, start, goal)
        if path is not None and len(path) >= config.min_distance:
            return tuple(rows), start, goal


@lru_cache(maxsize=16)
def heldout_layouts(config: PlanPathConfig) -> frozenset[tuple[tuple[str, ...], Cell, Cell]]:
    """The first `heldout_instances` held-out instances, which training must never use."""
    return frozenset(generate_grid(config, split_seed("heldout", i)) for i in range(config.heldout_instances))


class PlanPathEnv:
    """One Plan-Path instance. The action is a list of moves ('U', 'D', 'L', 'R')."""

    def __init__(self, config: PlanPathConfig | None = None) -> None:
        self.config = config or PlanPathConfig()
        self.grid: tuple[str, ...] = ()
        self.start: Cell = (0, 0)
        self.goal: Cell = (0, 0)
        self.position: Cell = (0, 0)
        self.steps_taken = 0
        self.hit_invalid = False
        self._dist: dict[Cell, int] = {}

    @classmethod
    def from_layout(cls, grid: tuple[str, ...], start: Cell, goal: Cell) -> PlanPathEnv:
        """A hand-made instance (worked examples, tests): `grid`'s rows, S at `start`, G at `goal`."""
        env = cls(PlanPathConfig(size=len(grid)))
        env.grid, env.start, env.goal, env.position = grid, start, goal, start
        env._dist = distances_to(list(grid), goal)
        return env

    def reset(self, seed: int) -> None:
        """Build the grid for `seed`; training seeds skip grids of the held-out set."""
        layout = generate_grid(self.config, seed)
        if seed < split_seed("heldout", 0):
            avoid = heldout_layouts(self.config)
            bump = 0
            while layout in avoid:
                bump += 1
                layout = generate_grid(self.config, seed * 7919 + bump + 10**8)
        self.grid, self.start, self.goal = layout
        self.position = self.start
        self.steps_taken = 0
        self.hit_invalid = False
        self._dist = distances_to(list(self.grid), self.goal)

    @property
    def success(self) -> bool:
        return self.position == self.goal

    @property
    def done(self) -> bool:
        return self.success or self.hit_invalid or self.steps_taken >= self.config.step_budget

    def distance(self) -> int:
        """Shortest-path distance from the current position to the goal."""
        return self._dist[self.position]

    def shortest_path(self) -> str:
        """BFS moves from the current position to the goal."""
        path = bfs_path(list(self.grid), self.position, self.goal)
        assert path is not None, "generated grids are solvable by construction"
        return path

    def is_free(self, cell: Cell) -> bool:
        r, c = cell
        n = self.config.size
        return 0 <= r < n and 0 <= c < n and self.grid[r][c] != WALL

    def step(self, action: list[str]) -> StepResult:
        """Execute moves in order; stop at the first invalid move, the goal, or the budget.

        info: "executed" (moves applied), "ignored" (moves left unread after the episode ended)
        and, on an invalid move, "invalid_at" (its 0-based index among the executed moves).
        """
        cfg = self.config
        terms = {"step_cost": 0.0, "invalid": 0.0, "progress": 0.0, "goal": 0.0}
        start_distance = max(self._dist[self.start], 1)
        executed = 0
        info: dict[str, object] = {}
        for move in action:
            if self.done:
                break
            if move not in MOVES:
                raise ValueError(f"unknown move {move!r}: moves are {sorted(MOVES)}")
            dr, dc = MOVES[move]
            target = (self.position[0] + dr, self.position[1] + dc)
            self.steps_taken += 1
            terms["step_cost"] -= cfg.step_cost
            if not self.is_free(target):
                self.hit_invalid = True
                terms["invalid"] -= cfg.invalid_penalty
                info["invalid_at"] = executed
                break
            before = self._dist[self.position]
            self.position = target
            executed += 1
            terms["progress"] += cfg.progress_coef * (before - self._dist[target]) / start_distance
            if self.success:
                terms["goal"] += cfg.goal_bonus
        info["executed"] = executed
        # Moves left unread once the episode ended (goal, invalid move or budget): a verifier refuses
        # a plan that reaches the goal and goes on (see `teamrl.workflows.tool_plan`).
        info["ignored"] = len(action) - executed - (1 if "invalid_at" in info else 0)
        return StepResult(reward=sum(terms.values()), done=self.done, terms=terms, info=info)

    def forfeit(self) -> StepResult:
        """End the episode as failed, with the invalid-move penalty (for an action with no moves).

        Without it, answering nothing would be a safe harbour: cheaper than a move that might be
        invalid, and a policy learns to say nothing (seen in a single-agent GRPO run).
        """
        self.hit_invalid = True
        penalty = -self.config.invalid_penalty
        return StepResult(reward=penalty, done=True, terms={"invalid": penalty}, info={"executed": 0})

    def render(self) -> str:
        """Rows of the grid with S (current position) and G marked."""
        rows = [list(row) for row in self.grid]
        rows[self.goal[0]][self.goal[1]] = "G"
        rows[self.position[0]][self.position[1]] = "S"
        return "\n".join("".join(row) for row in rows)


def make_instance(config: PlanPathConfig, split: str, index: int) -> PlanPathEnv:
    """Instance `index` of a split, reset and ready ('heldout' as `config.heldout_split` resolves it)."""
    env = PlanPathEnv(config)
    if split == "heldout" and config.heldout_split:
        half = heldout_half(config, config.heldout_split)
        if not 0 <= index < len(half):
            raise ValueError(
                f"plan_path's {config.heldout_split} split has {len(half)} grids (instance {index} asked); "
                "evaluate at most that many (train.eval_instances) or raise task.heldout_instances"
            )
        index = half[index]
    env.reset(split_seed(split, index))
    return env


@lru_cache(maxsize=16)
def heldout_half(config: PlanPathConfig, half: str) -> tuple[int, ...]:
    """The held-out list indices of the validation half (the first `heldout_instances // 2`) or the test
    half (the rest, less the grids the validation half holds)."""
    middle = config.heldout_instances // 2
    if half == "validation":
        return tuple(range(middle))
    seen = {generate_grid(config, split_seed("heldout", i)) for i in range(middle)}
    rest = range(middle, config.heldout_instances)
    return tuple(i for i in rest if generate_grid(config, split_seed("heldout", i)) not in seen)
