"""Split-Nav's reward terms, its verifiers against degenerate answers, and the roles' interdependence."""

import random

import pytest

from teamrl.demos.split_nav import NavSkill, composition
from teamrl.tasks.plan_path import bfs_path
from teamrl.tasks.split_nav import SplitNavConfig, parse_cell, parse_walk
from teamrl.workflows.split_nav_team import SplitNavWorkflow

CONFIG = SplitNavConfig()


def team_episode(report: str, walk_of=None, index: int = 0):
    """One validation episode: the spotter says `report`, the walker walks `walk_of(state)`."""
    wf = SplitNavWorkflow(CONFIG)
    state = wf.new_state("heldout", index)
    spot = wf.apply("spotter", state, report)
    walk = wf.apply("walker", state, walk_of(state) if walk_of else "")
    return wf, state, spot, walk


def true_cell(state):
    r, c = state.layout[2]
    return f"{r}{c}"


def shortest(state):
    grid, start, goal = state.layout
    return bfs_path(list(grid), start, goal)


def test_team_term_needs_both_roles():
    wf, state, spot, walk = team_episode("", shortest)  # spotter says nothing; the walk would be right
    _, _, spot_ok, walk_ok = team_episode(true_cell(wf.new_state("heldout", 0)), shortest)
    assert spot_ok.terms["team"] == 1.0 and walk_ok.terms["team"] == 1.0
    assert spot.terms["team"] == 0.0 and spot.terms["format"] == -CONFIG.format_penalty
    # The walker sees the report, not the goal: its prompt has no G and shows the report it got.
    prompt = wf.render("walker", wf.new_state("heldout", 0))
    assert "G" not in prompt and "goal=?" in prompt
    assert "S" not in wf.render("spotter", state)


def test_walk_that_ends_on_the_goal_scores_team_and_full_local():
    _, state, _, walk = team_episode("00", shortest)
    assert walk.terms == {"team": 1.0, "local": CONFIG.progress_coef, "format": 0.0}
    assert state.solved


def test_local_terms_are_partial_credit():
    wf = SplitNavWorkflow(CONFIG)
    state = wf.new_state("heldout", 1)
    r, c = state.layout[2]
    near = f"{r}{c + 1}" if c + 1 < CONFIG.size else f"{r}{c - 1}"
    spot = wf.apply("spotter", state, near)
    assert spot.terms["team"] == 0.0
    assert spot.terms["local"] == pytest.approx(CONFIG.closeness_coef * (1 - 1 / (2 * (CONFIG.size - 1))))
    path = shortest(state)
    walk = wf.apply("walker", state, path[:-1])  # one move short of G
    assert walk.terms["team"] == 0.0
    assert walk.terms["local"] == pytest.approx(CONFIG.progress_coef * (len(path) - 1) / len(path))


@pytest.mark.parametrize("answer", ["", "   ", "2323", "23 24", "00 01 02 03 04 10 11", "goal is 23", "99"])
def test_degenerate_reports_score_nothing(answer):
    wf = SplitNavWorkflow(CONFIG)
    state = wf.new_state("heldout", 2)
    spot = wf.apply("spotter", state, answer)
    assert spot.team == 0.0 and spot.local <= 0.0


def test_degenerate_walks_score_nothing():
    wf = SplitNavWorkflow(CONFIG)
    for index in range(30):
        for walk in ("", "R" * 30, "UDLR" * 5, "RRRRDDDDLLLLUUUU", "right right", "R R D"):
            state = wf.new_state("heldout", index)
            out = wf.apply("walker", state, walk)
            if walk == "UDLR" * 5 and out.team:  # a legal walk that happens to end on G is a real solution
                continue
            assert out.team == 0.0, (index, walk)
            assert out.local <= 0.0 or walk in ("UDLR" * 5,), (index, walk, out.terms)


def test_a_walk_that_passes_the_goal_and_goes_on_is_refused():
    wf = SplitNavWorkflow(CONFIG)
    state = wf.new_state("heldout", 0)
    out = wf.apply("walker", state, shortest(state) + "UDUD")
    assert out.team == 0.0 and out.local == 0.0 and not wf.success(state)


def test_parsers():
    assert parse_cell("(1, 2)", 5) == (1, 2)
    assert parse_cell("1 2 3", 5) is None
    assert parse_walk("UUDD", 20) == list("UUDD")
    assert parse_walk("uudd", 20) is None


def test_demos_are_broad_not_planted():
    shares = composition(SplitNavWorkflow(CONFIG), episodes=600)
    for agent in ("spotter", "walker"):
        mine = {k: v for k, v in shares.items() if k.startswith(agent + "/")}
        correct = mine[f"{agent}/correct" if agent == "spotter" else "walker/shortest"]
        errors = {k: v for k, v in mine.items() if not k.endswith(("/correct", "/shortest"))}
        assert 0.4 < correct < 0.6
        assert max(errors.values()) < 0.3 and max(errors.values()) < correct  # no majority mistake
    assert 0.2 < shares["team/success"] < 0.5


def test_skill_shares_must_add_up():
    with pytest.raises(ValueError, match="spot_\\* shares must add up to 1"):
        NavSkill(spot_correct=0.9)


def test_the_single_agent_sees_both_halves():
    wf = SplitNavWorkflow(CONFIG, single_agent=True)
    state = wf.new_state("heldout", 0)
    prompt = wf.render("solo", state)
    assert "S" in prompt and "G" in prompt
    assert wf.apply("solo", state, shortest(state)).team == 1.0
