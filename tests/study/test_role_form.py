"""Per-role form and rightness of test episodes (`teamrl.study.role_form`), counted by hand."""

from types import SimpleNamespace

from teamrl.rollout.tree import Episode
from teamrl.study.role_form import pooled, role_form
from teamrl.study.table import role_form_lines


def _episode(*turns):
    return Episode(0, None, transcript=[{"agent": a, "terms": t} for a, t in turns])


TEAM = SimpleNamespace(agents=[SimpleNamespace(name="reasoner", role="reasoner"), SimpleNamespace(name="tool", role="tool")])


def test_counts_by_hand_with_the_math_teams_terms():
    episodes = [
        _episode(("reasoner", {"correct": 1.0, "format": 0.1}), ("tool", {"correct": 0.0, "format": -0.1})),
        _episode(("reasoner", {"correct": 0.0, "format": 0.1}), ("tool", {"correct": 1.0, "format": 0.1})),
        _episode(("reasoner", {"correct": 0.0, "format": -0.1}), ("tool", {"correct": 1.0, "format": 0.1})),
    ]
    assert role_form(TEAM, episodes) == {
        "reasoner": {"turns": 3, "well_formed": 2, "right": 1, "right_formed": 1},
        "tool": {"turns": 3, "well_formed": 2, "right": 2, "right_formed": 2},
    }


def test_a_zero_format_term_is_well_formed_and_a_role_without_terms_is_only_counted():
    # Split-Calc: a parsed answer has format 0 and its own answer's rightness in `team`.
    pair = SimpleNamespace(agents=[SimpleNamespace(name="a", role="analyst"), SimpleNamespace(name="c", role="calculator")])
    episodes = [_episode(("a", {"team": 1.0, "format": 0.0}), ("c", {})), _episode(("a", {"team": 0.0, "format": -0.1}), ("c", {}))]
    counts = role_form(pair, episodes)
    assert counts["analyst"] == {"turns": 2, "well_formed": 1, "right": 1, "right_formed": 1}
    assert counts["calculator"] == {"turns": 2}


def test_table_pools_cells_over_seeds():
    cell = {"reasoner": {"turns": 4, "well_formed": 2, "right": 1, "right_formed": 1}}
    records = [{"row": "team_transfer", "seed": s, "test_success": 0.1, "roles": cell} for s in (0, 1)]
    assert pooled(records) == {"reasoner": {"turns": 8, "well_formed": 4, "right": 2, "right_formed": 2}}
    results = {"rows": ["team_transfer"], "labels": {"team_transfer": "team, unseen"}, "results": records}
    assert role_form_lines(results) == ["| team, unseen | reasoner | 8 | 50.0% | 25.0% | 50.0% |"]
