"""Sudoku: generation, uniqueness, actions, reward terms, splits and copying."""

from __future__ import annotations

import copy

import pytest

from teamrl.tasks.base import Environment, split_seed
from teamrl.tasks.sudoku import (
    SudokuConfig,
    SudokuEnv,
    generate_puzzle,
    heldout_puzzles,
    instance,
    search,
    solve,
)


def solution_rows(env: SudokuEnv) -> list[list[int]]:
    n = env.size
    return [list(env.solution[r * n:(r + 1) * n]) for r in range(n)]


def blank_cells(env: SudokuEnv) -> list[tuple[int, int]]:
    n = env.size
    return [divmod(i, n) for i, v in enumerate(env.puzzle) if not v]


def consistent_wrong_digit(env: SudokuEnv) -> tuple[int, int, int] | None:
    """A placement that breaks no rule yet is not the solution digit (if the state has one)."""
    n = env.size
    for r, c in blank_cells(env):
        for d in range(1, n + 1):
            if d != env.solution[r * n + c] and env._why_invalid(env.cells, r, c, d) is None:
                return r, c, d
    return None


def test_follows_the_environment_protocol() -> None:
    assert isinstance(instance("train", 0), Environment)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": 5}, "size must be 4 or 9, got 5"),
        ({"size": 4, "num_blanks": 13}, "num_blanks must be between 1 and 12"),
        ({"size": 9, "num_blanks": 65}, "num_blanks must be between 1 and 64"),
        ({"num_blanks": -1}, "num_blanks must be between"),
        ({"max_steps": -2}, "max_steps must be >= 0"),
        ({"invalid_penalty": -1.0}, "invalid_penalty must be >= 0"),
        ({"max_attempts": 0}, "max_attempts must be >= 1"),
    ],
)
def test_config_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SudokuConfig(**kwargs)


def test_defaults_follow_the_size() -> None:
    assert SudokuConfig(size=4).blanks == 8 and SudokuConfig(size=9).blanks == 40
    assert SudokuConfig(size=9).step_budget == 80
    assert SudokuConfig(size=9, num_blanks=30, max_steps=5).step_budget == 5


def test_same_seed_same_puzzle_and_seeds_differ() -> None:
    for cfg in (SudokuConfig(size=4), SudokuConfig(size=9, heldout_instances=5)):
        assert instance("train", 3, cfg).render() == instance("train", 3, cfg).render()
        assert instance("heldout", 1, cfg).render() == instance("heldout", 1, cfg).render()
        assert len({instance("train", i, cfg).render() for i in range(10)}) >= 8


def test_render_shows_digits_and_blanks() -> None:
    env = instance("train", 0, SudokuConfig(size=9, num_blanks=30, heldout_instances=5))
    rows = env.render().splitlines()
    assert len(rows) == 9 and all(len(row) == 9 for row in rows)
    assert sum(row.count(".") for row in rows) == 30
    assert set("".join(rows)) <= set("123456789.")


def assert_valid_solution(grid: tuple[int, ...], n: int) -> None:
    box = {4: 2, 9: 3}[n]
    rows = [grid[r * n:(r + 1) * n] for r in range(n)]
    digits = set(range(1, n + 1))
    assert all(set(row) == digits for row in rows)
    assert all({rows[r][c] for r in range(n)} == digits for c in range(n))
    for br in range(0, n, box):
        for bc in range(0, n, box):
            cells = {rows[r][c] for r in range(br, br + box) for c in range(bc, bc + box)}
            assert cells == digits


@pytest.mark.parametrize(
    ("size", "num_blanks", "count"),
    [(4, 0, 60), (4, 12, 40), (9, 0, 12), (9, 50, 4)],
)
def test_puzzles_are_valid_unique_and_solvable(size: int, num_blanks: int, count: int) -> None:
    cfg = SudokuConfig(size=size, num_blanks=num_blanks, heldout_instances=0)
    for index in range(count):
        env = instance("heldout", index, cfg)
        assert_valid_solution(env.solution, size)
        assert sum(1 for v in env.puzzle if not v) == cfg.blanks
        assert all(p in (0, s) for p, s in zip(env.puzzle, env.solution))
        solutions, found = search(env.puzzle, size, limit=2)
        assert solutions == 1 and tuple(found or ()) == env.solution
        result = env.step(solve(env))
        assert env.success and result.done
        assert result.terms["goal"] == cfg.goal_bonus
        assert result.terms["progress"] == pytest.approx(cfg.progress_coef)
        assert result.info["executed"] == cfg.blanks


def test_whole_grid_action_solves() -> None:
    env = instance("train", 2)
    result = env.step(solution_rows(env))
    assert env.success and result.info["grid"] is True
    assert result.info["executed"] == env.config.blanks  # only changed cells count


def test_grid_is_judged_as_a_whole() -> None:
    # An earlier wrong (but rule-abiding) entry must not make the corrected grid invalid.
    for index in range(20):
        env = instance("train", index)
        wrong = consistent_wrong_digit(env)
        if wrong is not None:
            break
    else:
        pytest.skip("no rule-abiding wrong digit in the first puzzles")
    first = env.step([wrong])
    assert not first.done and first.terms["progress"] == 0.0
    result = env.step(solution_rows(env))
    assert env.success and result.terms["invalid"] == 0.0


def test_every_reward_term_and_clearing() -> None:
    env = instance("train", 4)
    n = env.size
    (r, c), *_ = blank_cells(env)
    good = env.step([(r, c, env.solution[r * n + c])])
    assert good.terms["step_cost"] == pytest.approx(-0.01)
    assert good.terms["progress"] == pytest.approx(0.5 / env.config.blanks)
    assert good.reward == pytest.approx(sum(good.terms.values()))
    cleared = env.step([(r, c, 0)])  # 0 clears an own entry: progress goes back
    assert cleared.terms["progress"] == pytest.approx(-0.5 / env.config.blanks)
    assert env.cells[r * n + c] == 0 and not cleared.done
    finish = env.step(solve(env))
    assert finish.terms["goal"] == 1.0 and finish.done


@pytest.mark.parametrize("kind", ["given", "conflict", "range"])
def test_invalid_placement_ends_the_episode(kind: str) -> None:
    env = instance("train", 1)
    n = env.size
    (r, c), *_ = blank_cells(env)
    ok = (r, c, env.solution[r * n + c])
    if kind == "given":
        gi = next(i for i, v in enumerate(env.puzzle) if v)
        bad = (gi // n, gi % n, env.puzzle[gi] % n + 1)
        reason = "changes a given cell"
    elif kind == "conflict":
        r2, c2 = blank_cells(env)[1]
        peer = next(p for p in range(n * n) if env.puzzle[p] and (p // n == r2 or p % n == c2))
        bad = (r2, c2, env.puzzle[peer])
        reason = "repeats"
    else:
        bad = (r, n, 1)
        reason = "out of range"
    result = env.step([ok, bad, ok])
    assert result.done and env.done and not env.success
    assert result.terms["invalid"] == -0.5
    assert result.info["invalid_at"] == 1 and result.info["executed"] == 1
    assert result.info["ignored"] == 1
    assert reason in result.info["reason"]
    assert env.cells[r * n + c] == ok[2]  # the placement before the invalid one stays
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step([ok])


def test_invalid_grid_applies_nothing() -> None:
    env = instance("train", 6)
    rows = solution_rows(env)
    gi = next(i for i, v in enumerate(env.puzzle) if v)
    rows[gi // 4][gi % 4] = 0  # blanking a given is changing it
    before = list(env.cells)
    result = env.step(rows)
    assert result.done and result.terms["invalid"] == -0.5
    assert result.info["executed"] == 0 and env.cells == before
    assert result.info["cell"] == divmod(gi, 4)


def test_placement_budget_ends_the_episode() -> None:
    env = instance("train", 8, SudokuConfig(max_steps=2))
    result = env.step(solve(env))
    assert result.done and not env.success
    assert result.info["executed"] == 2 and result.info["budget_exhausted"] is True


def test_bad_actions_fail_loudly() -> None:
    env = SudokuEnv()
    with pytest.raises(RuntimeError, match="call reset"):
        env.render()
    env.reset(0)
    with pytest.raises(TypeError, match="list of \\(row, col, digit\\)"):
        env.step("1234")
    with pytest.raises(TypeError, match="must be \\(row, col, digit\\)"):
        env.step([(0, 1)])
    with pytest.raises(TypeError, match="must be ints"):
        env.step([(0, 1, "2")])


def test_deepcopy_is_independent() -> None:
    env = instance("train", 9)
    before = env.render()
    clone = copy.deepcopy(env)
    clone.step(solve(clone))
    assert clone.success
    assert env.render() == before and env.steps_taken == 0 and not env.done


def test_train_and_heldout_are_disjoint() -> None:
    # 4 givens on a 4x4 grid repeat often, so the avoidance is really exercised.
    cfg = SudokuConfig(size=4, num_blanks=12, heldout_instances=300)
    heldout = heldout_puzzles(cfg)
    raw = [generate_puzzle(cfg, split_seed("train", i))[0] for i in range(500)]
    assert sum(p in heldout for p in raw) >= 1
    assert all(instance("train", i, cfg).puzzle not in heldout for i in range(500))
    assert instance("heldout", 7, cfg).puzzle in heldout
