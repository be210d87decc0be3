"""Imperfect scripted Sokoban and Sudoku agents, whose transcripts warm up the tiny default model.

As in `plan_path_demos`, they are imperfect in a *systematic* way, so that a model imitating them
is weak even under greedy decoding (random noise would average out):

Sokoban
- tool: calls `solve(grid, player, boxes)` only sometimes; otherwise it swaps the player with the
  first box and drops the others (`solve(grid, boxes[0], [player])`), which solves a different room.
- plan: follows a tool proposal that reached the goal only sometimes; otherwise it plans in its
  head: the true shortest solution, or a naive push that walks (rows first, walls and boxes
  ignored) behind the first box and pushes it straight at the nearest free target, vertically
  then horizontally.

Sudoku
- tool: prints `solve(grid)` only sometimes; otherwise it prints `singles(grid)`, which fills only
  the blanks forced on the current grid (a complete grid for very few puzzles; valid progress).
- plan: follows a tool grid that reached the goal only sometimes; otherwise it writes the solution
  or a column- and box-blind fill: each row's blanks get its missing digits in increasing order.

`demonstrations(workflow, seed, skill)` yields (agent, prompt, response) triples like Plan-Path's;
`scripted_success_rate` measures the scripted team (or single planner) on a split.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from teamrl.demos.plan_path import TrustedRunner
from teamrl.tasks import sokoban, sudoku
from teamrl.workflows.sokoban_team import SokobanWorkflow
from teamrl.workflows.sudoku_team import SudokuWorkflow, grid_line
from teamrl.workflows.tool_plan import ToolPlanState, ToolPlanWorkflow

__all__ = ["PlanningSkill", "TrustedRunner", "demonstrations", "scripted_response", "scripted_success_rate"]


@dataclass(frozen=True)
class PlanningSkill:
    """How often each scripted agent does the right thing."""

    tool_correct: float = 0.3
    """Probability that the tool writes the right program (else its systematic mistake)."""
    plan_trust: float = 0.3
    """Probability that the planner copies a tool proposal whose simulation reached the goal."""
    plan_solve: float = 0.4
    """When planning in its head: probability of the true solution (else the flawed heuristic)."""

    def __post_init__(self) -> None:
        for name in ("tool_correct", "plan_trust", "plan_solve"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"PlanningSkill.{name} must be a probability in [0, 1], got {value}")


# ---------------------------------------------------------------------------- Sokoban


def _walk(start: tuple[int, int], goal: tuple[int, int]) -> str:
    """Rows first, then columns, ignoring walls and boxes."""
    (r, c), (gr, gc) = start, goal
    vertical = "D" * (gr - r) if gr > r else "U" * (r - gr)
    return vertical + ("R" * (gc - c) if gc > c else "L" * (c - gc))


def naive_push(env: sokoban.SokobanEnv) -> str:
    """Walk behind the first off-target box and push it at the nearest free target (flawed)."""
    targets = env.target_cells
    loose = [b for b in env.box_cells if b not in targets]
    free = [t for t in targets if t not in env.box_cells]
    if not loose or not free:
        return ""
    (br, bc), player = loose[0], env.player_cell
    tr, tc = min(free, key=lambda t: abs(t[0] - br) + abs(t[1] - bc))
    moves = ""
    if tr != br:
        step = 1 if tr > br else -1
        moves += _walk(player, (br - step, bc)) + ("D" if step > 0 else "U") * abs(tr - br)
        player, br = (tr - step, bc), tr
    if tc != bc:
        step = 1 if tc > bc else -1
        moves += _walk(player, (br, bc - step)) + ("R" if step > 0 else "L") * abs(tc - bc)
    return moves


def sokoban_tool(state: ToolPlanState, rng: random.Random, skill: PlanningSkill) -> str:
    if rng.random() < skill.tool_correct:
        return "print(solve(grid,player,boxes))"
    return "print(solve(grid,boxes[0],[player]))"


def sokoban_plan(state: ToolPlanState, rng: random.Random, skill: PlanningSkill, with_tool: bool) -> str:
    if with_tool and state.simulation == "goal" and rng.random() < skill.plan_trust:
        return "follow"
    if rng.random() < skill.plan_solve:
        moves = sokoban.solve(state.env)
        if moves:
            return "".join(moves)
    return naive_push(state.env)


# ---------------------------------------------------------------------------- Sudoku


def row_blind_fill(env: sudoku.SudokuEnv) -> str:
    """Each row's blanks get its missing digits in increasing order (columns, boxes ignored)."""
    rows = []
    for row in env.grid:
        missing = iter(sorted(set(range(1, env.size + 1)) - set(row)))
        rows.append([v or next(missing, 0) for v in row])
    return grid_line(rows)


def sudoku_tool(state: ToolPlanState, rng: random.Random, skill: PlanningSkill) -> str:
    if rng.random() < skill.tool_correct:
        return "print(solve(grid))"
    return "print(singles(grid))"


def sudoku_plan(state: ToolPlanState, rng: random.Random, skill: PlanningSkill, with_tool: bool) -> str:
    if with_tool and state.simulation == "goal" and rng.random() < skill.plan_trust:
        return "follow"
    env: sudoku.SudokuEnv = state.env
    if rng.random() < skill.plan_solve:
        n = env.size
        return grid_line([list(env.solution[r * n : (r + 1) * n]) for r in range(n)])
    return row_blind_fill(env)


# ---------------------------------------------------------------------------- episodes

_SCRIPTS = {
    SokobanWorkflow: (sokoban_tool, sokoban_plan),
    SudokuWorkflow: (sudoku_tool, sudoku_plan),
}


def scripted_response(
    workflow: ToolPlanWorkflow,
    agent: str,
    state: ToolPlanState,
    rng: random.Random,
    skill: PlanningSkill,
) -> str:
    """What the scripted `agent` says in `state`."""
    scripts = _SCRIPTS.get(type(workflow))
    if scripts is None:
        raise TypeError(
            f"no scripted agents for {type(workflow).__name__}; known: {[cls.__name__ for cls in _SCRIPTS]}"
        )
    tool, plan = scripts
    if agent == "tool":
        return tool(state, rng, skill)
    return plan(state, rng, skill, not workflow.single_agent)


def _episode(
    workflow: ToolPlanWorkflow, state: ToolPlanState, rng: random.Random, skill: PlanningSkill
) -> Iterator[tuple[str, str, str]]:
    """Play a scripted episode on `state`, yielding (agent, prompt, response) before each apply."""
    for _ in range(workflow.max_turns):
        for agent in workflow.agents:
            if workflow.is_done(state):
                return
            prompt = workflow.compact_render(agent.name, state)
            response = scripted_response(workflow, agent.name, state, rng, skill)
            yield agent.name, prompt, response
            workflow.apply(agent.name, state, response)


def demonstrations(workflow: ToolPlanWorkflow, seed: int, skill: PlanningSkill) -> Iterator[tuple[str, str, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training instances."""
    rng = random.Random(seed)
    index = seed * 1_000_003 % 10_000_000
    while True:
        index += 1
        yield from _episode(workflow, workflow.new_state("train", index), rng, skill)


def scripted_success_rate(
    workflow: ToolPlanWorkflow,
    skill: PlanningSkill,
    instances: int = 200,
    split: str = "heldout",
    seed: int = 0,
) -> float:
    """Fraction of the first `instances` instances of `split` the scripted agents solve."""
    if instances < 1:
        raise ValueError(f"instances must be >= 1, got {instances}")
    rng = random.Random(seed)
    solved = 0
    for index in range(instances):
        state = workflow.new_state(split, index)
        for _ in _episode(workflow, state, rng, skill):
            pass
        solved += workflow.success(state)
    return solved / instances
