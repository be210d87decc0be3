import copy

import pytest

from teamrl.tasks.plan_path import PlanPathConfig, PlanPathEnv, bfs_path, heldout_layouts, make_instance


def test_instances_are_solvable_deterministic_and_respect_min_distance():
    config = PlanPathConfig(size=6, min_distance=3)
    for i in range(100):
        env = make_instance(config, "train", i)
        path = env.shortest_path()
        assert len(path) >= 3
        assert make_instance(config, "train", i).grid == env.grid
        result = env.step(list(path))
        assert env.success and result.done and result.terms["goal"] == config.goal_bonus


def test_train_never_uses_a_heldout_grid():
    config = PlanPathConfig(size=3, wall_prob=0.3, heldout_instances=50)  # tiny grids collide often
    heldout = heldout_layouts(config)
    for i in range(300):
        env = make_instance(config, "train", i)
        assert (env.grid, env.start, env.goal) not in heldout


def test_every_reward_term_and_invalid_move_ends_episode():
    env = PlanPathEnv(PlanPathConfig(size=5))
    env.grid, env.start, env.goal = ("..#..", ".....", ".....", ".....", "....."), (0, 1), (0, 3)
    env.position = env.start
    from teamrl.tasks.plan_path import distances_to
    env._dist = distances_to(list(env.grid), env.goal)
    trial = copy.deepcopy(env)
    r = trial.step(["D"])  # away from nothing: distance 4 -> 3? check progress sign below
    assert r.terms["step_cost"] == pytest.approx(-0.02)
    assert r.terms["progress"] != 0
    r = trial.step(["U", "R"])  # back up, then into the wall
    assert r.terms["invalid"] == pytest.approx(-0.5) and trial.done and not trial.success
    assert env.position == (0, 1)  # the copy never moved the original


def test_unknown_move_is_an_error_and_bad_config_is_explained():
    env = make_instance(PlanPathConfig(size=4), "heldout", 0)
    with pytest.raises(ValueError, match="unknown move"):
        env.step(["X"])
    with pytest.raises(ValueError, match="size must be between 3 and 20"):
        PlanPathConfig(size=1)


def test_bfs_helper_finds_shortest_path():
    grid = ["...", ".#.", "..."]
    assert len(bfs_path(grid, (0, 0), (2, 2))) == 4
    assert bfs_path([".#.", "###", "..."], (0, 0), (2, 2)) is None


def test_validation_and_test_halves_share_no_grid_and_training_avoids_both():
    """A study picks checkpoints on the held-out list's first half and reports its second: no grid in both."""
    base = PlanPathConfig(size=4, min_distance=2, heldout_instances=120)  # small grids: duplicates do occur
    halves = {}
    for half in ("validation", "test"):
        config = PlanPathConfig(size=4, min_distance=2, heldout_instances=120, heldout_split=half)
        grids = []
        i = 0
        while True:
            try:
                env = make_instance(config, "heldout", i)
            except ValueError as err:
                assert f"plan_path's {half} split has {i} grids" in str(err)
                break
            grids.append((env.grid, env.start, env.goal))
            i += 1
        halves[half] = grids
    assert len(halves["validation"]) == 60 and 0 < len(halves["test"]) <= 60
    assert not set(halves["validation"]) & set(halves["test"])
    whole = [make_instance(base, "heldout", i) for i in range(120)]
    assert halves["validation"] == [(e.grid, e.start, e.goal) for e in whole[:60]]
    assert set(halves["validation"]) | set(halves["test"]) <= heldout_layouts(base)
    train = {(e.grid, e.start, e.goal) for e in (make_instance(base, "train", i) for i in range(300))}
    assert not train & set(halves["test"])
    with pytest.raises(ValueError, match="heldout_split = 'dev' is invalid"):
        PlanPathConfig(heldout_split="dev")
