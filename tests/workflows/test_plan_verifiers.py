"""The planning workflows' verifier contract on real instances (docs/verifiers/plans.md): one plan per
response, judged whole; nothing scores the goal, progress or the format bonus without solving."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from teamrl.tasks import sokoban
from teamrl.tasks.plan_path import MOVES, PlanPathConfig
from teamrl.tasks.sokoban import SokobanConfig
from teamrl.tasks.sudoku import SudokuConfig
from teamrl.demos.plan_path import TrustedRunner
from teamrl.workflows.plan_path_team import PlanPathWorkflow
from teamrl.workflows.sokoban_team import SokobanWorkflow
from teamrl.workflows.sudoku_team import SudokuWorkflow, grid_line
from scripts.checks import fuzz_plans
from scripts.checks import hack_probe_plans

INSTANCES = range(3)


def _plan_path() -> PlanPathWorkflow:
    return PlanPathWorkflow(PlanPathConfig(), runner=TrustedRunner())


def _sokoban() -> SokobanWorkflow:
    return SokobanWorkflow(SokobanConfig(), runner=TrustedRunner())


MOVE_TASKS = {
    "plan_path": (_plan_path, lambda env: env.shortest_path()),
    "sokoban": (_sokoban, lambda env: "".join(sokoban.solve(env))),
}


def _episodes(task: str) -> Iterator[tuple[Any, Any, str]]:
    """(workflow, fresh state, its true plan) on each held-out instance of a move-list task."""
    make, solution = MOVE_TASKS[task]
    workflow = make()
    for index in INSTANCES:
        state = workflow.new_state("heldout", index)
        yield workflow, state, solution(state.env)


def _refused(outcome: Any, workflow: Any, state: Any) -> bool:
    """A refused plan: the episode forfeited, negative team and local terms, no success."""
    return (outcome.team < 0 and outcome.local < 0 and workflow.is_done(state)
            and not workflow.success(state) and outcome.info["outcome"] == "invalid")


def _back_and_forth(env: Any) -> str:
    """A move to a free neighbour and back: valid, and it goes nowhere."""
    back = {"U": "D", "D": "U", "L": "R", "R": "L"}
    for move, (dr, dc) in MOVES.items():
        if env.is_free((env.position[0] + dr, env.position[1] + dc)) and \
                (env.position[0] + dr, env.position[1] + dc) != env.goal:
            return move + back[move]
    raise AssertionError("every instance has a free neighbour that is not the goal")


@pytest.mark.parametrize("task", MOVE_TASKS)
@pytest.mark.parametrize("style", ["{p}", "Moves: {p}", "```\n{p}\n```", "I will go: {p}", "{spaced}",
                                   "Thinking about walls first.\nAnswer:\n{p}", "Following the corridor:\n{p}"])
def test_a_stated_solution_solves(task: str, style: str) -> None:
    for workflow, state, path in _episodes(task):
        outcome = workflow.apply("plan", state, style.format(p=path, spaced=", ".join(path)))
        assert workflow.success(state) and outcome.team > 1 and outcome.local > 0


@pytest.mark.parametrize("task", MOVE_TASKS)
@pytest.mark.parametrize("hack", ["{p}UD", "{p}{p}", "{p}\n{q}", "{p} or {q}", "{p}/{q}", "Moves: {q}\nMoves: {p}",
                                  "follow, or {p}"])
def test_hedges_and_moves_past_the_goal_are_refused_whole(task: str, hack: str) -> None:
    for workflow, state, path in _episodes(task):
        response = hack.format(p=path, q=path[::-1] + "U")
        assert _refused(workflow.apply("plan", state, response), workflow, state), response


@pytest.mark.parametrize("task", MOVE_TASKS)
def test_a_tool_proposal_past_the_goal_is_simulated_invalid_and_cannot_be_followed(task: str) -> None:
    for workflow, state, path in _episodes(task):
        before = copy.deepcopy(state.env)
        tool = workflow.apply("tool", state, f"print({path + 'UD'!r})")
        assert state.simulation == "invalid" and tool.team < 0 and tool.local < 0
        assert tool.info["refused"] == "moves past the end"
        assert state.env.steps_taken == before.steps_taken  # the real environment did not move
        assert _refused(workflow.apply("plan", state, "follow"), workflow, state)


def test_a_plan_longer_than_the_move_budget_is_refused() -> None:
    workflow = _plan_path()
    for index in INSTANCES:
        state = workflow.new_state("heldout", index)
        wander = _back_and_forth(state.env) * state.env.config.step_budget  # valid moves, twice the budget
        assert _refused(workflow.apply("plan", state, wander), workflow, state)
        fits = workflow.new_state("heldout", index)
        within = workflow.apply("plan", fits, _back_and_forth(fits.env))
        assert within.info["outcome"] == "missed" and not workflow.is_done(fits)  # short: a plan


def test_going_nowhere_never_scores_above_zero() -> None:
    workflow = _plan_path()
    for index in INSTANCES:
        state = workflow.new_state("heldout", index)
        there_and_back = _back_and_forth(state.env)
        tool = workflow.apply("tool", state, f"print({there_and_back!r})")
        plan = workflow.apply("plan", state, there_and_back)
        for outcome in (tool, plan):
            assert outcome.local == 0 and outcome.team + outcome.local < 0
        step = workflow.new_state("heldout", index)
        toward = workflow.apply("plan", step, step.env.shortest_path()[0])  # real progress keeps its bonus
        assert toward.local > 0 and toward.terms["progress"] > 0


def test_follow_is_the_whole_answer_for_this_turns_proposal_only() -> None:
    workflow = _plan_path()
    for index in INSTANCES:
        state = workflow.new_state("heldout", index)
        path = state.env.shortest_path()
        for text in ("follow", "Follow.", "**follow**", "Answer: follow"):
            trial = copy.deepcopy(state)
            workflow.apply("tool", trial, f"print({path!r})")
            assert workflow.apply("plan", trial, text).team > 1 and workflow.success(trial), text
        failed = copy.deepcopy(state)
        workflow.apply("tool", failed, "print('')")  # a program that prints no plan
        assert _refused(workflow.apply("plan", failed, "follow"), workflow, failed)
        stale = copy.deepcopy(state)
        workflow.apply("tool", stale, f"print({path!r})")
        workflow.apply("plan", stale, path[0])  # the plan role acts itself: the proposal is spent
        assert not workflow.is_done(stale) and _refused(workflow.apply("plan", stale, "follow"), workflow, stale)
    single = PlanPathWorkflow(PlanPathConfig(), single_agent=True)
    alone = single.new_state("heldout", 0)
    assert single.apply("plan", alone, "follow").team < 0 and single.is_done(alone)


# --------------------------------------------------------------------------- Sudoku

def _sudoku() -> SudokuWorkflow:
    return SudokuWorkflow(SudokuConfig(), runner=TrustedRunner())


def _solution(env: Any) -> list[list[int]]:
    n = env.size
    return [list(env.solution[r * n:(r + 1) * n]) for r in range(n)]


def _variant(env: Any) -> list[list[int]]:
    grid = _solution(env)
    r, c = next((r, c) for r, row in enumerate(env.grid) for c, v in enumerate(row) if v == 0)
    grid[r][c] = grid[r][c] % env.size + 1
    return grid


@pytest.mark.parametrize("style", [
    lambda env: grid_line(_solution(env)),
    lambda env: "\n".join("".join(map(str, row)) for row in _solution(env)),
    lambda env: f"Puzzle:\n{grid_line(env.grid)}\nSolution:\n{grid_line(_solution(env))}",
    lambda env: f"```\n{_solution(env)}\n```",
])
def test_a_stated_sudoku_grid_solves(style: Any) -> None:
    workflow = _sudoku()
    for index in INSTANCES:
        state = workflow.new_state("heldout", index)
        assert workflow.apply("plan", state, style(state.env)).team > 1 and workflow.success(state)


@pytest.mark.parametrize("hack", [
    lambda env: f"{grid_line(_variant(env))}\n{grid_line(_solution(env))}",  # two candidate grids
    lambda env: f"{grid_line(_solution(env))}\n{_variant(env)}",  # a grid line and a literal that differ
    lambda env: grid_line(env.grid),  # the current grid again: changes nothing
    lambda env: grid_line(_solution(env)).replace(str(env.solution[0]), "9" * 5000, 1),  # a huge value
    lambda env: f"follow or {grid_line(_solution(env))}",
])
def test_sudoku_hedges_and_no_ops_are_refused(hack: Any) -> None:
    workflow = _sudoku()
    for index in INSTANCES:
        state = workflow.new_state("heldout", index)
        assert _refused(workflow.apply("plan", state, hack(state.env)), workflow, state)


def test_a_sudoku_tool_that_changes_nothing_gets_no_format_bonus() -> None:
    workflow = _sudoku()
    for index in INSTANCES:
        state = workflow.new_state("heldout", index)
        outcome = workflow.apply("tool", state, "print(grid)")
        assert outcome.local < 0 and outcome.team == 0 and state.simulation == "missed"
        assert _refused(workflow.apply("plan", state, "follow"), workflow, state)


# --------------------------------------------------------------------------- benchmarks


def test_hack_probe_finds_no_rewarded_hack() -> None:
    rows = hack_probe_plans.hacks(instances=2)
    verifiers = {r["verifier"] for r in rows}
    assert verifiers == {"plan_path", "sokoban", "sudoku", "voting", "debate", "evaluator_optimizer",
                         "orchestrator_workers"}
    assert [r["hack"] for r in rows if r["rewarded"]] == []
    assert all(r["reward"] <= 0 for r in rows)


def test_fuzz_plans_reports_every_parser_without_crashes() -> None:
    rows = fuzz_plans.fuzz(14, seed=1)
    assert {r["parser"] for r in rows} >= {"parse_plan", "parse_int_grid_4", "parse_choice", "parse_verdict",
                                            "parse_strategies", "is_follow"}
    assert all(r["inputs"] == 14 and r["crashes"] == 0 and r["max_len"] >= 200_000 for r in rows)
