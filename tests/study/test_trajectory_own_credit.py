"""trajectory_credit: own: each agent's own committed rewards, no success bonus (tree's per-turn rewards)."""

from types import SimpleNamespace

import pytest

from teamrl.config import AlgorithmConfig, load_config
from teamrl.training.credit import assign_advantages


def two_episodes():
    # One instance, K = 2 episodes, agents a and b; episode 0 succeeds.
    episodes = [SimpleNamespace(instance=0, success=True, rewards_by_agent={"a": 1.0, "b": 0.0}),
                SimpleNamespace(instance=0, success=False, rewards_by_agent={"a": 0.0, "b": 0.5})]
    samples = [SimpleNamespace(episode=e, agent=a, advantage=None) for e in (0, 1) for a in ("a", "b")]
    return samples, episodes


@pytest.mark.parametrize("credit, expected", [
    # own: a's returns [1, 0] -> centred [+0.5, -0.5]; b's [0, 0.5] -> [-0.25, +0.25]
    ("own", [0.5, -0.25, -0.5, 0.25]),
    # per_agent adds the success: a's [2, 0] -> [+1, -1]; b's [1, 0.5] -> [+0.25, -0.25]
    ("per_agent", [1.0, 0.25, -1.0, -0.25]),
])
def test_per_agent_returns_by_hand(credit, expected):
    samples, episodes = two_episodes()
    assign_advantages(samples, episodes, AlgorithmConfig(grouping="trajectory", trajectory_credit=credit,
                                                         scale_by_std=False))
    assert [s.advantage for s in samples] == pytest.approx(expected)


def test_own_is_accepted_and_a_typo_is_refused():
    assert load_config(None, ["algorithm.grouping=trajectory", "algorithm.trajectory_credit=own"])
    with pytest.raises(Exception, match="team, per_agent or own"):
        load_config(None, ["algorithm.trajectory_credit=mine"])
