import math

import pytest
import torch

from teamrl.algorithms.advantages import agentwise_scaled_advantages, group_ids, group_normalized_advantages


def test_group_ids_are_contiguous_in_first_appearance_order():
    keys = [(0, 0, "tool"), (0, 0, "plan"), (0, 0, "tool"), (1, 0, "tool"), (0, 1, "tool")]
    assert group_ids(keys).tolist() == [0, 1, 0, 2, 3]


def test_groups_never_merge_instances_turns_or_agents():
    # Every distinct (instance, turn, agent) must get its own group id.
    keys = [(i, t, a) for i in range(3) for t in range(2) for a in ("tool", "plan") for _ in range(4)]
    ids = group_ids(keys)
    for gid in ids.unique():
        members = {keys[j] for j in (ids == gid).nonzero().flatten().tolist()}
        assert len(members) == 1
    assert len(ids.unique()) == 3 * 2 * 2


def test_advantages_match_hand_computation():
    rewards = torch.tensor([1.0, 0.0, 0.0, 3.0, 3.0, 2.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    adv, metrics = group_normalized_advantages(rewards, groups, scale_by_std=True, eps=0.0)
    # group 0: mean 1/3, population std sqrt(2/9)
    std0 = math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 3)
    expected0 = [(1 - 1 / 3) / std0, (-1 / 3) / std0, (-1 / 3) / std0]
    std1 = math.sqrt((2 * (1 / 3) ** 2 + (2 / 3) ** 2) / 3)
    expected1 = [(1 / 3) / std1, (1 / 3) / std1, (-2 / 3) / std1]
    assert adv.tolist() == pytest.approx(expected0 + expected1, rel=1e-5)
    assert metrics["zero_signal_frac"] == 0.0


def test_dr_grpo_only_centres():
    adv, _ = group_normalized_advantages(torch.tensor([2.0, 4.0, 10.0]), torch.tensor([0, 0, 1]), scale_by_std=False)
    assert adv.tolist() == pytest.approx([-1.0, 1.0, 0.0])


def test_flat_groups_have_zero_advantage_and_are_counted():
    adv, metrics = group_normalized_advantages(torch.tensor([1.0, 1.0, 0.0, 2.0]), torch.tensor([0, 0, 1, 1]))
    assert adv[:2].tolist() == [0.0, 0.0]
    assert metrics["zero_signal_frac"] == 0.5


def test_non_finite_rewards_are_rejected():
    with pytest.raises(ValueError, match="NaN"):
        group_normalized_advantages(torch.tensor([1.0, float("nan")]), torch.tensor([0, 0]))


def test_agentwise_scaling_uses_each_agents_reward_std_across_its_groups():
    """Agent 0 has groups {0, 2} and {4, 6}: rewards 0, 2, 4, 6 have population std sqrt(5); each group's
    centred rewards -1, +1 are divided by sqrt(5) (per-group std would give -1, +1). Agent 1 has one group
    {10, 20} (std 5): centred -5, +5 -> -1, +1. Agent 1's flat group {3, 3} gives 0."""
    rewards = torch.tensor([0.0, 2.0, 4.0, 6.0, 10.0, 20.0, 3.0, 3.0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    agents = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    adv, metrics = agentwise_scaled_advantages(rewards, groups, agents, eps=0.0)
    s0 = math.sqrt(5.0)
    # agent 1's rewards 10, 20, 3, 3: mean 9, population std sqrt((1 + 121 + 36 + 36) / 4) = sqrt(48.5)
    s1 = math.sqrt(48.5)
    assert adv.tolist() == pytest.approx([-1 / s0, 1 / s0, -1 / s0, 1 / s0, -5 / s1, 5 / s1, 0.0, 0.0], rel=1e-5)
    assert metrics["zero_signal_frac"] == 0.25


def test_agentwise_scaling_differs_from_per_group_std_scaling():
    """The mitigation must change something when every group holds one agent (AT-GRPO's groups)."""
    rewards = torch.tensor([0.0, 1.0, 0.0, 0.1, 0.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    agents = torch.tensor([0, 0, 0, 0, 1, 1])
    per_group, _ = group_normalized_advantages(rewards, groups, eps=0.0)
    agentwise, _ = agentwise_scaled_advantages(rewards, groups, agents, eps=0.0)
    assert per_group[:4].tolist() == pytest.approx([-1.0, 1.0, -1.0, 1.0], rel=1e-5)
    # the small-spread group keeps a small advantage relative to the other group of the same agent
    assert abs(agentwise[2].item()) == pytest.approx(abs(agentwise[0].item()) / 10, rel=1e-5)
    assert not torch.allclose(per_group, agentwise)


def test_vectorised_matches_loop_reference():
    gen = torch.Generator().manual_seed(0)
    rewards = torch.rand(60, generator=gen)
    groups = torch.randint(0, 7, (60,), generator=gen)
    adv, _ = group_normalized_advantages(rewards, groups, eps=1e-6)
    for i in range(60):
        members = rewards[groups == groups[i]].double()
        ref = (rewards[i] - members.mean()) / (members.std(unbiased=False) + 1e-6)
        assert adv[i].item() == pytest.approx(ref.item(), abs=1e-5)


def test_equal_rewards_whose_mean_rounds_give_exactly_zero():
    # mean(0.1, 0.1, 0.1) is not exactly 0.1 in floating point; the group still has no signal.
    rewards = torch.tensor([0.1, 0.1, 0.1, 0.7, 0.7, 0.7, 0.3, 0.3], dtype=torch.float64)
    adv, metrics = group_normalized_advantages(rewards, torch.tensor([0, 0, 0, 1, 1, 1, 2, 2]))
    assert adv.tolist() == [0.0] * 8
    assert metrics["zero_signal_frac"] == 1.0
