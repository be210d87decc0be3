"""End to end through rollout -> advantages -> PPO update: the team learns an easy reward."""

import random
from statistics import mean

import pytest
import torch

from teamrl.config import AlgorithmConfig, PolicyConfig, TrainConfig
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights, run_episodes
from teamrl.training.credit import assign_advantages, trainable
from teamrl.training.update import make_optimizer, update_policy
from toy import ToyWorkflow, tiny_policy


def test_tree_grpo_raises_an_easy_reward_for_both_agents():
    torch.manual_seed(0)
    policy = tiny_policy("llama", seed=0)
    workflow = ToyWorkflow(max_turns=1)
    algo = AlgorithmConfig(k=8, minibatch_size=64)
    opt = make_optimizer(policy, PolicyConfig(lr=3e-3), TrainConfig(steps=30, warmup_steps=1), False)
    params = SamplingParams(temperature=1.0, max_new_tokens=4)
    gen, rng = torch.Generator().manual_seed(0), random.Random(0)
    per_step = []
    for step in range(30):
        samples, episodes = run_episodes(workflow, list(range(8)), "train", {"p": policy},
                                         {"a": "p", "b": "p"}, params, algo.k,
                                         RewardWeights(1.0, 0.0), gen, rng)
        assign_advantages(samples, episodes, algo)
        stats = update_policy(opt, trainable(samples, True), algo, 1.0, 1.0, rng)
        assert all(v == v and abs(v) != float("inf") for v in stats.values())
        per_step.append({a: mean(s.outcome.team for s in samples if s.agent == a) for a in ("a", "b")})
    for agent in ("a", "b"):  # the second agent learns too (its candidates are scored on their own)
        before = mean(p[agent] for p in per_step[:5])
        after = mean(p[agent] for p in per_step[-5:])
        assert after > before + 0.5, (agent, before, after)


def test_trajectory_grouping_gives_every_sample_its_episode_advantage():
    policy = tiny_policy("llama", seed=1)
    workflow = ToyWorkflow(max_turns=2)
    algo = AlgorithmConfig(grouping="trajectory", k=4)
    instances = [i for i in range(3) for _ in range(algo.k)]
    samples, episodes = run_episodes(workflow, instances, "train", {"p": policy},
                                     {"a": "p", "b": "p"}, SamplingParams(max_new_tokens=4), 1,
                                     RewardWeights(), torch.Generator().manual_seed(0), random.Random(0))
    assign_advantages(samples, episodes, algo)
    returns = [sum(e.rewards_by_agent.values()) for e in episodes]
    for s in samples:
        group = [returns[j] for j, e in enumerate(episodes) if e.instance == s.instance]
        mu, sd = mean(group), (sum((r - mean(group)) ** 2 for r in group) / len(group)) ** 0.5
        assert s.advantage == pytest.approx((returns[s.episode] - mu) / (sd + 1e-6), abs=1e-5)
