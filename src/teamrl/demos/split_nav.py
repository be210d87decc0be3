"""Scripted Split-Nav agents with a broad prior: right 75% of the time, wrong in several ways.

No single wrong behaviour is common (each error kind is at most a fifth of a role's answers), so a
model that imitates them is noisy rather than systematically wrong: sampled, it sometimes solves an
instance; RL's job is to make it do so reliably. `composition` counts what the scripts actually
did (from the code, over scripted episodes), for the study's report.

spotter: the true offset (75%), one part off by one (10%), one part's direction flipped (6%),
         the two parts exchanged (3%), a random offset (6%).
walker:  from the reported offset: the canonical walk (75%: the offset spelled out, vertical moves
         first, or horizontal first where a wall blocks that, else a shortest way around), that walk one
         move short (6%), one part one move too long (7%), one part's direction flipped (6%),
         a random short walk (6%).
solo:    the spotter's choice of an offset, then the walker's choice of a walk from it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from teamrl.demos.composition import count_behaviours
from teamrl.demos.driver import check_probabilities, demonstrations as drive
from teamrl.tasks.plan_path import MOVES, WALL, bfs_path
from teamrl.tasks.split_nav import Cell, Offset, format_offset, offset_of, parse_offset, target_of
from teamrl.workflows.base import Prompt
from teamrl.workflows.split_nav_team import SplitNavState, SplitNavWorkflow

_FLIP = {"U": "D", "D": "U", "L": "R", "R": "L"}


@dataclass(frozen=True)
class NavSkill:
    """How often each scripted behaviour is chosen (each role's shares add up to 1)."""

    spot_correct: float = 0.75
    spot_off_by_one: float = 0.1
    spot_flipped: float = 0.06
    spot_exchanged: float = 0.03
    spot_random: float = 0.06
    walk_correct: float = 0.75
    walk_short_by_one: float = 0.06
    walk_one_too_long: float = 0.07
    walk_flipped: float = 0.06
    walk_random: float = 0.06

    def __post_init__(self) -> None:
        check_probabilities(self)
        for prefix in ("spot_", "walk_"):
            total = sum(v for k, v in vars(self).items() if k.startswith(prefix))
            if abs(total - 1.0) > 1e-9:
                raise ValueError(f"NavSkill {prefix}* shares must add up to 1, got {total}")

    def shares(self, prefix: str) -> dict[str, float]:
        return {k[len(prefix) :]: v for k, v in vars(self).items() if k.startswith(prefix)}


def _pick(shares: dict[str, float], rng: random.Random) -> str:
    return rng.choices(list(shares), weights=list(shares.values()))[0]


def _on_grid(start: Cell, offset: Offset, size: int) -> bool:
    return offset != (0, 0) and target_of(start, offset, size) is not None


def spot(start: Cell, goal: Cell, size: int, rng: random.Random, skill: NavSkill) -> tuple[str, Offset]:
    """(behaviour kind, reported offset); a wrong kind that would leave the grid falls back to off by one."""
    kind = _pick(skill.shares("spot_"), rng)
    rows, cols = offset_of(start, goal)
    wrong = {
        "flipped": (-rows, cols) if rows and (not cols or rng.random() < 0.5) else (rows, -cols),
        "exchanged": (cols, rows),
        "random": (rng.randrange(size) - start[0], rng.randrange(size) - start[1]),
    }
    if kind in wrong and _on_grid(start, wrong[kind], size) and wrong[kind] != (rows, cols):
        return kind, wrong[kind]
    if kind == "correct":
        return kind, (rows, cols)
    nudges = [(rows + dr, cols + dc) for dr, dc in MOVES.values()]
    return "off_by_one", rng.choice([o for o in nudges if _on_grid(start, o, size)])


def canonical_walk(grid: tuple[str, ...], start: Cell, target: Cell) -> str | None:
    """The offset spelled out, vertical moves first; horizontal first where a wall blocks that; else a
    shortest path (None: the target is unreachable)."""
    rows, cols = offset_of(start, target)
    vertical = ("D" if rows > 0 else "U") * abs(rows)
    horizontal = ("R" if cols > 0 else "L") * abs(cols)
    for moves in (vertical + horizontal, horizontal + vertical):
        if _clear(grid, start, moves):
            return moves
    return bfs_path(list(grid), start, target) or None


def _clear(grid: tuple[str, ...], start: Cell, moves: str) -> bool:
    r, c = start
    for move in moves:
        dr, dc = MOVES[move]
        r, c = r + dr, c + dc
        if grid[r][c] == WALL:
            return False
    return True


def walk(
    grid: tuple[str, ...], start: Cell, target: Cell | None, rng: random.Random, skill: NavSkill
) -> tuple[str, str]:
    """(behaviour kind, moves) of a walk from `start` to the reported `target` (None: no usable report)."""
    path = canonical_walk(grid, start, target) if target is not None else None
    kind = _pick(skill.shares("walk_"), rng) if path else "random"
    if not path:  # no usable report, or no walk to it: a random walk
        return "random", "".join(rng.choice("UDLR") for _ in range(rng.randint(1, len(grid))))
    if kind == "correct":
        return kind, path
    if kind == "short_by_one" and len(path) > 1:
        return kind, path[:-1]
    if kind in ("one_too_long", "short_by_one"):
        part = rng.choice(sorted(set(path)))  # one more move of one of the offset's directions
        return "one_too_long", path.replace(part, part * 2, 1)
    if kind == "flipped":
        part = rng.choice(sorted(set(path)))
        return kind, "".join(_FLIP[m] if m == part else m for m in path)
    return "random", "".join(rng.choice("UDLR") for _ in range(rng.randint(1, len(grid))))


def respond(
    agent: str, state: SplitNavState, rng: random.Random, skill: NavSkill, size: int, record: Counter | None = None
) -> str:
    """The scripted answer of `agent`; `record` (if given) counts the behaviour kinds chosen."""
    grid, start, goal = state.layout
    if agent == "spotter":
        kind, offset = spot(start, goal, size, rng, skill)
        answer = format_offset(offset)
    elif agent == "walker":
        target = target_of(start, parse_offset(state.report or "", size), size)
        kind, answer = walk(grid, start, target, rng, skill)
    else:
        spot_kind, offset = spot(start, goal, size, rng, skill)
        walk_kind, answer = walk(grid, start, target_of(start, offset, size), rng, skill)
        kind = f"{spot_kind}+{walk_kind}"
    if record is not None:
        record[f"{agent}/{kind}"] += 1
    return answer


def demonstrations(
    workflow: SplitNavWorkflow, seed: int, skill: NavSkill | None = None
) -> Iterator[tuple[str, Prompt, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training instances."""
    skill = skill or NavSkill()
    size = workflow.task.size
    return drive(workflow, seed, lambda agent, state, rng: respond(agent, state, rng, skill, size))


def composition(
    workflow: SplitNavWorkflow, episodes: int = 2000, seed: int = 0, skill: NavSkill | None = None
) -> dict[str, float]:
    """Shares of each scripted behaviour per agent, and the scripted team's success, over `episodes`
    scripted episodes on training instances (what the warm-up imitates)."""
    skill = skill or NavSkill()
    size = workflow.task.size
    return count_behaviours(
        workflow, lambda agent, state, rng, record: respond(agent, state, rng, skill, size, record), episodes, seed
    )
