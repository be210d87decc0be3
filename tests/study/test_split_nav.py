"""Split-Nav's reward terms, its verifiers against degenerate answers, and the roles' interdependence."""

import pytest

from teamrl.demos.split_nav import NavSkill, canonical_walk, composition
from teamrl.tasks.plan_path import bfs_path
from teamrl.tasks.split_nav import SplitNavConfig, format_offset, offset_of, parse_offset, parse_walk, render_radar
from teamrl.workflows.split_nav_team import SplitNavWorkflow

CONFIG = SplitNavConfig()


def team_episode(report: str, walk_of=None, index: int = 0):
    """One validation episode: the spotter says `report`, the walker walks `walk_of(state)`."""
    wf = SplitNavWorkflow(CONFIG)
    state = wf.new_state("heldout", index)
    spot = wf.apply("spotter", state, report)
    walk = wf.apply("walker", state, walk_of(state) if walk_of else "")
    return wf, state, spot, walk


def true_offset(state):
    return format_offset(offset_of(state.layout[1], state.layout[2]))


def shortest(state):
    grid, start, goal = state.layout
    return bfs_path(list(grid), start, goal)


def test_offsets_by_hand():
    # From (3, 0) to (1, 1): two rows up, one column right.
    assert offset_of((3, 0), (1, 1)) == (-2, 1) and format_offset((-2, 1)) == "U2R1"
    assert parse_offset("U2R1", 5) == (-2, 1) and parse_offset("U2 R1", 5) == (-2, 1)
    assert parse_offset("R4", 5) == (0, 4) and parse_offset("D1", 5) == (1, 0)


def test_team_term_needs_both_roles():
    wf = SplitNavWorkflow(CONFIG)
    _, _, spot_ok, walk_ok = team_episode(true_offset(wf.new_state("heldout", 0)), shortest)
    assert spot_ok.terms["team"] == 1.0 and walk_ok.terms["team"] == 1.0
    _, state, spot, walk = team_episode("", shortest)  # spotter says nothing; the walk alone is right
    assert spot.terms["team"] == 0.0 and spot.terms["format"] == -CONFIG.format_penalty
    assert walk.terms["local"] == 0.0  # a walk that follows no report earns no faithfulness
    # The walker sees the report, not the goal; the spotter sees the cells, not the walls.
    prompt = wf.render("walker", wf.new_state("heldout", 0))
    assert "G" not in prompt and "goal" not in prompt and "offset=?" in prompt
    spotter_prompt = wf.render("spotter", state)
    assert "#" not in spotter_prompt and "G" in spotter_prompt


def test_walking_the_right_report_scores_team_and_full_local():
    report = true_offset(SplitNavWorkflow(CONFIG).new_state("heldout", 0))
    _, state, spot, walk = team_episode(report, shortest)
    assert spot.terms == {"team": 1.0, "local": CONFIG.closeness_coef, "format": 0.0}
    assert walk.terms == {"team": 1.0, "local": CONFIG.progress_coef, "format": 0.0}
    assert state.solved


def cells_of(start, moves):
    r, c = start
    for move in moves:
        r, c = r + {"U": -1, "D": 1}.get(move, 0), c + {"L": -1, "R": 1}.get(move, 0)
        yield r, c


def test_local_terms_are_partial_credit_and_faithfulness():
    wf = SplitNavWorkflow(CONFIG)
    for index in range(60):  # an instance whose one-column-off report has a walk that avoids G
        state = wf.new_state("heldout", index)
        grid, start, goal = state.layout
        rows, cols = offset_of(start, goal)
        near = (rows, cols + (1 if goal[1] + 1 < CONFIG.size else -1))
        target = (start[0] + near[0], start[1] + near[1])
        path = canonical_walk(grid, start, target) if near[1] and grid[target[0]][target[1]] != "#" else None
        if path and goal not in cells_of(start, path):
            break
    else:
        pytest.fail("no instance with a usable one-column-off report")
    spot = wf.apply("spotter", state, format_offset(near))
    assert spot.terms["team"] == 0.0
    assert spot.terms["local"] == pytest.approx(CONFIG.closeness_coef * (1 - 1 / (2 * (CONFIG.size - 1))))
    walk = wf.apply("walker", state, path)  # faithful to a wrong report: local credit, no team credit
    assert walk.terms == {"team": 0.0, "local": CONFIG.progress_coef, "format": 0.0}
    state = wf.new_state("heldout", 0)
    wf.apply("spotter", state, true_offset(state))  # a right report, a walk one move short: nothing
    assert wf.apply("walker", state, shortest(state)[:-1]).terms == {"team": 0.0, "local": 0.0, "format": 0.0}


@pytest.mark.parametrize("answer", ["", "   ", "D2L2D2L2", "D2L2 U1", "L2D2", "D0", "D9", "U1D1",
                                    "down 2 left 2", "DDLL", "22", "D2L", "d2l2"])
def test_degenerate_reports_score_nothing(answer):
    wf = SplitNavWorkflow(CONFIG)
    state = wf.new_state("heldout", 2)
    spot = wf.apply("spotter", state, answer)
    assert spot.team == 0.0 and spot.local <= 0.0 and spot.terms["format"] == -CONFIG.format_penalty


def test_degenerate_walks_score_nothing():
    wf = SplitNavWorkflow(CONFIG)
    for index in range(30):
        for walk in ("", "R" * 30, "UDLR" * 5, "RRRRDDDDLLLLUUUU", "right right", "R R D", "D2L2"):
            state = wf.new_state("heldout", index)
            wf.apply("spotter", state, true_offset(state))
            out = wf.apply("walker", state, walk)
            if walk == "UDLR" * 5 and out.team:  # a legal walk that happens to end on G is a real solution
                continue
            assert out.team == 0.0, (index, walk)
            assert out.local <= 0.0 or walk in ("UDLR" * 5,), (index, walk, out.terms)


def test_a_walk_smuggled_in_the_report_earns_the_team_nothing():
    # The spotter writes the walk itself instead of an offset; the walker copies it onto G.
    _, state, spot, walk = team_episode(shortest(SplitNavWorkflow(CONFIG).new_state("heldout", 0)), shortest)
    assert spot.terms["format"] == -CONFIG.format_penalty and spot.team == 0.0
    assert state.env.success and walk.team == 0.0 and walk.local == 0.0 and not state.solved


def test_a_walk_that_passes_the_goal_and_goes_on_is_refused():
    wf = SplitNavWorkflow(CONFIG)
    state = wf.new_state("heldout", 0)
    wf.apply("spotter", state, true_offset(state))
    out = wf.apply("walker", state, shortest(state) + "UDUD")
    assert out.team == 0.0 and out.local == 0.0 and not wf.success(state)


def test_parsers():
    assert parse_offset("D2L2", 5) == (2, -2)
    assert parse_offset("D5", 5) is None  # a part of N cells leaves an N x N grid from anywhere
    assert parse_offset("D4", 4) is None and parse_offset("D3", 4) == (3, 0)
    assert parse_walk("UUDD", 20) == list("UUDD")
    assert parse_walk("uudd", 20) is None


def test_the_radar_draws_the_goal_at_its_offset_from_the_start():
    wf = SplitNavWorkflow(CONFIG)
    for index in range(20):
        state = wf.new_state("heldout", index)
        rows = render_radar(state.layout, CONFIG.size).split("\n")
        where = {ch: (r, row.index(ch)) for r, row in enumerate(rows) for ch in "SG" if ch in row}
        assert len(rows) == 2 * CONFIG.size - 1 and where["S"] == (CONFIG.size - 1, CONFIG.size - 1)
        drawn = (where["G"][0] - where["S"][0], where["G"][1] - where["S"][1])
        assert drawn == offset_of(state.layout[1], state.layout[2])


def test_canonical_walk_goes_around_a_wall():
    grid = ("..", "#.")  # from (0, 0) to (1, 1): down first hits the wall, so right first
    assert canonical_walk(grid, (0, 0), (1, 1)) == "RD"
    assert canonical_walk(("..", ".."), (0, 0), (1, 1)) == "DR"


def test_demos_are_broad_not_planted():
    shares = composition(SplitNavWorkflow(CONFIG), episodes=600)
    for agent in ("spotter", "walker"):
        mine = {k: v for k, v in shares.items() if k.startswith(agent + "/")}
        correct = mine[f"{agent}/correct"]
        errors = {k: v for k, v in mine.items() if not k.endswith("/correct")}
        assert 0.65 < correct < 0.85
        assert max(errors.values()) < 0.3 and max(errors.values()) < correct  # no majority mistake
    assert 0.4 < shares["team/success"] < 0.7


def test_skill_shares_must_add_up():
    with pytest.raises(ValueError, match="spot_\\* shares must add up to 1"):
        NavSkill(spot_correct=0.9)


def test_the_single_agent_sees_both_halves():
    wf = SplitNavWorkflow(CONFIG, single_agent=True)
    state = wf.new_state("heldout", 0)
    prompt = wf.render("solo", state)
    assert "S" in prompt and "G" in prompt and "#" in prompt
    assert wf.apply("solo", state, shortest(state)).team == 1.0
