"""Scripted Split-Nav agents with a broad prior: right about half the time, wrong in several ways.

No single wrong behaviour is common (each error kind is at most 15% of a role's answers), so a
model that imitates them is noisy rather than systematically wrong: sampled, it sometimes solves an
instance; RL's job is to make it do so reliably. `composition` counts what the scripts actually
did (from the code, over scripted episodes), for the study's report.

spotter: the true cell (50%), row off by one (15%), column off by one (15%), row and column swapped
         (10%), a random cell (10%).
walker:  towards the reported cell: the shortest path (50%), a wall-blind rows-then-columns walk
         (20%), the shortest path one move short (15%), a random short walk (15%).
solo:    the spotter's choice of a goal, then the walker's choice of a walk to it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from teamrl.demos.composition import count_behaviours
from teamrl.demos.driver import check_probabilities, demonstrations as drive
from teamrl.tasks.plan_path import bfs_path
from teamrl.tasks.split_nav import Cell, parse_cell
from teamrl.workflows.split_nav_team import SplitNavState, SplitNavWorkflow


@dataclass(frozen=True)
class NavSkill:
    """How often each scripted behaviour is chosen (each role's shares add up to 1)."""

    spot_correct: float = 0.5
    spot_row_off: float = 0.15
    spot_col_off: float = 0.15
    spot_swapped: float = 0.1
    spot_random: float = 0.1
    walk_shortest: float = 0.5
    walk_blind: float = 0.2
    walk_short_by_one: float = 0.15
    walk_random: float = 0.15

    def __post_init__(self) -> None:
        check_probabilities(self)
        for prefix in ("spot_", "walk_"):
            total = sum(v for k, v in vars(self).items() if k.startswith(prefix))
            if abs(total - 1.0) > 1e-9:
                raise ValueError(f"NavSkill {prefix}* shares must add up to 1, got {total}")

    def shares(self, prefix: str) -> dict[str, float]:
        return {k[len(prefix):]: v for k, v in vars(self).items() if k.startswith(prefix)}


def _pick(shares: dict[str, float], rng: random.Random) -> str:
    return rng.choices(list(shares), weights=list(shares.values()))[0]


def spot(goal: Cell, size: int, rng: random.Random, skill: NavSkill) -> tuple[str, Cell]:
    """(error kind, reported cell): the kind is 'correct' or one of the spotter's error kinds."""
    kind = _pick(skill.shares("spot_"), rng)
    r, c = goal
    step = rng.choice((-1, 1))
    if kind == "row_off":
        cell = (r + step if 0 <= r + step < size else r - step, c)
    elif kind == "col_off":
        cell = (r, c + step if 0 <= c + step < size else c - step)
    elif kind == "swapped":
        cell = (c, r) if r != c else (r, c + step if 0 <= c + step < size else c - step)
    elif kind == "random":
        cell = (rng.randrange(size), rng.randrange(size))
    else:
        cell = goal
    return kind, cell


def walk(grid: tuple[str, ...], start: Cell, target: Cell | None, rng: random.Random,
         skill: NavSkill) -> tuple[str, str]:
    """(behaviour kind, moves) of a walk from `start` towards `target` (None: no usable report)."""
    kind = "random" if target is None else _pick(skill.shares("walk_"), rng)
    path = bfs_path(list(grid), start, target) if target is not None else None
    if kind in ("shortest", "short_by_one") and not path:
        kind = "blind"  # the target is a wall, unreachable or the start: walk at it blindly
    if kind == "shortest":
        return kind, path
    if kind == "short_by_one" and len(path) > 1:
        return kind, path[:-1]
    if kind in ("blind", "short_by_one") and target is not None:
        (r, c), (tr, tc) = start, target
        moves = ("D" * (tr - r) if tr > r else "U" * (r - tr)) + ("R" * (tc - c) if tc > c else "L" * (c - tc))
        if moves:
            return "blind", moves
    return "random", "".join(rng.choice("UDLR") for _ in range(rng.randint(1, len(grid))))


def respond(agent: str, state: SplitNavState, rng: random.Random, skill: NavSkill, size: int,
            record: Counter | None = None) -> str:
    """The scripted answer of `agent`; `record` (if given) counts the behaviour kinds chosen."""
    grid, start, goal = state.layout
    if agent == "spotter":
        kind, cell = spot(goal, size, rng, skill)
        answer = f"{cell[0]}{cell[1]}"
    elif agent == "walker":
        kind, answer = walk(grid, start, parse_cell(state.report or "", size), rng, skill)
    else:
        spot_kind, cell = spot(goal, size, rng, skill)
        walk_kind, answer = walk(grid, start, cell, rng, skill)
        kind = f"{spot_kind}+{walk_kind}"
    if record is not None:
        record[f"{agent}/{kind}"] += 1
    return answer


def demonstrations(workflow: SplitNavWorkflow, seed: int, skill: NavSkill | None = None
                   ) -> Iterator[tuple[str, str, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training instances."""
    skill = skill or NavSkill()
    size = workflow.task.size
    return drive(workflow, seed, lambda agent, state, rng: respond(agent, state, rng, skill, size))


def composition(workflow: SplitNavWorkflow, episodes: int = 2000, seed: int = 0,
                skill: NavSkill | None = None) -> dict[str, float]:
    """Shares of each scripted behaviour per agent, and the scripted team's success, over `episodes`
    scripted episodes on training instances (what the warm-up imitates)."""
    skill = skill or NavSkill()
    size = workflow.task.size
    return count_behaviours(workflow, lambda agent, state, rng, record: respond(agent, state, rng, skill, size,
                                                                              record), episodes, seed)
