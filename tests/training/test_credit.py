"""Trajectory-level credit: one shared outcome vs per-agent returns, against hand-computed values."""

import pytest

from teamrl.config import AlgorithmConfig, ConfigError, load_config
from teamrl.rollout.tree import Episode, Sample
from teamrl.training.credit import assign_advantages
from teamrl.workflows.base import Outcome


def _sample(episode: int, agent: str, turn: int = 0) -> Sample:
    return Sample(generation=None, outcome=Outcome(0.0, 0.0), reward=0.0, episode=episode, instance=0,
                  turn=turn, agent=agent, role="generator", policy="generator")


def _batch() -> tuple[list[Sample], list[Episode]]:
    # Two episodes of instance 0. Episode 0: g0 right (1.0), g1 wrong, the team succeeds;
    # episode 1: both wrong, the team fails.
    episodes = [Episode(0, None, rewards_by_agent={"g0": 1.0, "g1": 0.0}, success=True),
                Episode(0, None, rewards_by_agent={"g0": 0.0, "g1": 0.0}, success=False)]
    samples = [_sample(0, "g0"), _sample(0, "g0", turn=1), _sample(0, "g1"), _sample(1, "g0"), _sample(1, "g1")]
    return samples, episodes


def test_team_credit_gives_every_agent_the_episode_outcome():
    samples, episodes = _batch()
    assign_advantages(samples, episodes, AlgorithmConfig(grouping="trajectory", scale_by_std=False))
    # returns 1.0 and 0.0 -> centred +0.5 / -0.5 for every agent of the episode
    assert [s.advantage for s in samples] == [0.5, 0.5, 0.5, -0.5, -0.5]


def test_per_agent_credit_adds_own_reward_to_the_team_success():
    samples, episodes = _batch()
    algo = AlgorithmConfig(grouping="trajectory", scale_by_std=False, trajectory_credit="per_agent")
    assign_advantages(samples, episodes, algo)
    # g0: returns 1 + 1 = 2 and 0 -> +1 / -1; g1: 0 + 1 = 1 and 0 -> +0.5 / -0.5
    assert [s.advantage for s in samples] == [1.0, 1.0, 0.5, -1.0, -0.5]


def test_unknown_trajectory_credit_is_rejected():
    with pytest.raises(ConfigError, match="trajectory_credit"):
        load_config(None, ["algorithm.trajectory_credit=mine"])


def test_rft_imitates_every_response_of_the_successful_episodes_only():
    samples, episodes = _batch()
    metrics = assign_advantages(samples, episodes, AlgorithmConfig(grouping="trajectory", objective="rft"))
    assert [s.advantage for s in samples] == [1.0, 1.0, 1.0, 0.0, 0.0]  # g1 was wrong, but its team succeeded
    assert metrics == {"kept_fraction": 0.6, "successful_episodes": 0.5}


def test_rft_needs_trajectory_grouping_and_objectives_are_checked():
    with pytest.raises(ConfigError, match="set algorithm.grouping=trajectory"):
        load_config(None, ["algorithm.objective=rft"])
    with pytest.raises(ConfigError, match="grpo or rft"):
        load_config(None, ["algorithm.objective=dpo"])
    assert load_config(None, ["algorithm.objective=rft", "algorithm.grouping=trajectory"]).algorithm.objective == "rft"


def test_rft_update_gradient_is_the_sft_gradient_of_the_kept_responses():
    """At ratio 1 the clipped loss with A = 1 has the gradient of the token-mean NLL of the kept responses."""
    import torch

    from teamrl.algorithms.losses import ppo_clip_loss

    logits = torch.randn(3, 4, requires_grad=True)
    logp = torch.log_softmax(logits, -1)[:, 0]  # one token per response
    mask = torch.ones(3, 1)
    advantages = torch.tensor([1.0, 1.0, 0.0])
    loss = ppo_clip_loss(logp[:, None], logp.detach()[:, None], advantages, mask, 0.2, 0.2, "token-mean")[0]
    loss.backward()
    got = logits.grad.clone()
    logits.grad = None
    nll = -(torch.log_softmax(logits, -1)[:2, 0]).sum() / 3  # token-mean over all 3 tokens, zeros for A = 0
    nll.backward()
    assert torch.allclose(got, logits.grad, atol=1e-6)
