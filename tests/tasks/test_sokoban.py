"""Sokoban: generation, solvability, reward terms, splits and copying."""

from __future__ import annotations

import copy

import pytest

from teamrl.tasks.base import Environment, split_seed
from teamrl.tasks.sokoban import (
    Layout,
    SokobanConfig,
    SokobanEnv,
    generate_layout,
    heldout_layouts,
    instance,
    solve,
)

OPEN_ROOM = """
#######
#.....#
#.@$.x#
#.....#
#.....#
#.....#
#######
"""


def room(text: str, **config: object) -> SokobanEnv:
    env = SokobanEnv(SokobanConfig(**config))  # type: ignore[arg-type]
    env.load(Layout.from_text(text))
    return env


def test_follows_the_environment_protocol() -> None:
    assert isinstance(instance("train", 0), Environment)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": 4}, "size must be between 5 and 16, got 4"),
        ({"num_boxes": 0}, "num_boxes must be >= 1, got 0"),
        ({"size": 5, "num_boxes": 4}, "does not fit"),
        ({"wall_prob": 0.5}, "wall_prob must be in [0, 0.5)"),
        ({"scramble_min": 0}, "scramble_min must be >= 1"),
        ({"scramble_min": 5, "scramble_max": 4}, "scramble_max must be >= scramble_min"),
        ({"min_solution_moves": 0}, "min_solution_moves must be >= 1"),
        ({"max_steps": -1}, "max_steps must be >= 0"),
        ({"step_cost": -0.1}, "step_cost must be >= 0"),
        ({"heldout_instances": -1}, "heldout_instances must be >= 0"),
    ],
)
def test_config_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)")):
        SokobanConfig(**kwargs)


def test_same_seed_same_instance_and_seeds_differ() -> None:
    cfg = SokobanConfig(num_boxes=2)
    assert instance("train", 7, cfg).render() == instance("train", 7, cfg).render()
    assert instance("heldout", 3, cfg).render() == instance("heldout", 3, cfg).render()
    renders = {instance("train", i, cfg).render() for i in range(30)}
    assert len(renders) >= 25


def test_reset_before_use_and_bad_seed() -> None:
    env = SokobanEnv()
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(["U"])
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        env.reset(-1)


@pytest.mark.parametrize("num_boxes", [1, 2])
@pytest.mark.parametrize("split", ["train", "heldout"])
def test_generated_instances_are_solvable(num_boxes: int, split: str) -> None:
    cfg = SokobanConfig(num_boxes=num_boxes)
    for index in range(40):
        env = instance(split, index, cfg)
        board = env.render()
        assert board.count("@") + board.count("+") == 1
        assert board.count("$") + board.count("*") == num_boxes
        assert board.count("x") + board.count("*") + board.count("+") == num_boxes
        assert not env.success and not env.done
        moves = solve(env)
        assert moves is not None, board
        assert len(moves) >= cfg.min_solution_moves  # trivial starts are rejected
        result = env.step(moves)
        assert env.success and result.done, board
        assert result.terms["goal"] == cfg.goal_bonus
        # Potential-based progress sums to progress_coef over a full solve.
        assert result.terms["progress"] == pytest.approx(cfg.progress_coef)
        assert result.info["executed"] == len(moves)


def test_larger_rooms_generate_and_solve() -> None:
    cfg = SokobanConfig(size=8, num_boxes=2, wall_prob=0.2)
    for index in range(5):
        env = instance("train", index, cfg)
        moves = solve(env)
        assert moves is not None
        env.step(moves)
        assert env.success


def test_push_and_every_reward_term() -> None:
    env = room(OPEN_ROOM)
    assert env.distance() == 2
    first = env.step(["R"])  # pushes the box one cell towards the target
    assert first.terms["step_cost"] == pytest.approx(-0.01)
    assert first.terms["progress"] == pytest.approx(0.5 * 1 / 2)
    assert first.terms["goal"] == 0.0 and first.terms["invalid"] == 0.0
    assert first.reward == pytest.approx(sum(first.terms.values()))
    assert env.box_cells == [(2, 4)] and env.player_cell == (2, 3)
    last = env.step(["R", "U", "U"])  # the goal ends the episode; later moves are ignored
    assert last.terms["goal"] == 1.0 and last.done and env.success
    assert last.info == {"executed": 1, "ignored": 2}
    assert "*" in env.render() and env.render().splitlines()[2] == "#...@*#"
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step(["L"])


def test_pushing_away_gives_negative_progress() -> None:
    env = room(OPEN_ROOM.replace("#.@$.x#", "#..$@x#"))
    result = env.step(["L"])
    assert result.terms["progress"] < 0


def open_room_with(row2: str, row3: str = "#.....#") -> str:
    """OPEN_ROOM with its rows 2 and 3 replaced."""
    rows = OPEN_ROOM.strip().splitlines()
    rows[2], rows[3] = row2, row3
    return "\n".join(rows)


@pytest.mark.parametrize(
    ("text", "moves", "reason", "at"),
    [
        (open_room_with("#@$..x#"), ["R", "L", "L"], "walked into a wall", 2),
        (open_room_with("#$@..x#"), ["L"], "pushed a box into a wall", 0),
        (open_room_with("#.$$@x#", "#....x#"), ["L"], "pushed a box into another box", 0),
    ],
)
def test_invalid_move_ends_the_episode(text: str, moves: list[str], reason: str, at: int) -> None:
    env = room(text)
    before = env.render()
    result = env.step(moves + ["R"])
    assert result.done and env.done and not env.success
    assert result.terms["invalid"] == -0.5
    assert result.info["invalid_at"] == at and result.info["executed"] == at
    assert reason in result.info["reason"]
    assert result.info["ignored"] == len(moves) - at  # the moves after the invalid one
    if at == 0:
        assert env.render() == before  # the invalid move changed nothing


def test_move_budget_ends_the_episode() -> None:
    env = room(OPEN_ROOM, max_steps=3)
    result = env.step(["U", "D", "U", "D", "U"])
    assert result.done and not env.success
    assert result.info["executed"] == 3 and result.info["budget_exhausted"] is True
    assert result.terms["invalid"] == 0.0


def test_bad_actions_fail_loudly() -> None:
    env = instance("train", 0)
    with pytest.raises(TypeError, match="list of moves"):
        env.step("UDLR")
    with pytest.raises(ValueError, match="unknown move 'X'"):
        env.step(["U", "X"])
    with pytest.raises(ValueError, match="exactly one player"):
        Layout.from_text("#####\n#.$x#\n#...#\n#...#\n#####")


def test_deepcopy_is_independent() -> None:
    env = instance("train", 5, SokobanConfig(num_boxes=2))
    before = env.render()
    clone = copy.deepcopy(env)
    moves = solve(clone)
    assert moves is not None
    clone.step(moves)
    assert clone.success and clone.steps_taken == len(moves)
    assert env.render() == before and env.steps_taken == 0 and not env.done
    assert solve(env) == moves


def test_solve_reports_dead_positions() -> None:
    env = room(OPEN_ROOM.replace("#.@$.x#", "#$@..x#"))
    assert solve(env) is None  # a box against a wall with no target along it is stuck
    env = room(OPEN_ROOM)
    assert solve(env) == ["R", "R"]


def test_train_and_heldout_are_disjoint() -> None:
    cfg = SokobanConfig(heldout_instances=200)
    heldout = heldout_layouts(cfg)
    assert all(instance("train", i, cfg).layout not in heldout for i in range(300))
    assert {instance("heldout", i, cfg).layout for i in range(20)} <= heldout
    # A tiny open room collides often, so the avoidance is really exercised here.
    tiny = SokobanConfig(size=5, wall_prob=0.0, min_solution_moves=1, heldout_instances=100)
    tiny_heldout = heldout_layouts(tiny)
    raw = [generate_layout(tiny, split_seed("train", i)) for i in range(100)]
    assert sum(layout in tiny_heldout for layout in raw) > 10
    assert all(instance("train", i, tiny).layout not in tiny_heldout for i in range(100))
