"""Hand-made samples for diagnostics tests, and a tiny policy's real samples for update tests."""

from __future__ import annotations

import random

import torch

from teamrl.config import AlgorithmConfig
from teamrl.rollout.builtin_engine import Generation, SamplingParams
from teamrl.rollout.tree import RewardWeights, Sample, run_episodes
from teamrl.training.credit import assign_advantages
from teamrl.training.update import PolicyOptimizer
from teamrl.workflows.base import Outcome
from toy import ToyWorkflow, tiny_policy


def sample(agent: str, role: str, text: str = "x", reward: float = 0.0, advantage: float = 0.0,
           terms: dict | None = None, episode: int = 0, turn: int = 0, committed: bool = True,
           length: int | None = None, policy: str = "shared") -> Sample:
    """A sample whose response has `length` tokens (default: one per character of `text`)."""
    n = len(text) if length is None else length
    gen = Generation([1, 2], list(range(3, 3 + n)), [-1.0] * n, [-1.0] * n, text, True)
    return Sample(gen, Outcome(reward, 0.0, dict(terms or {})), reward, episode, episode, turn, agent, role,
                  policy, committed, advantage)


def toy_samples(seed: int = 0, instances: int = 3, k: int = 4) -> tuple[list[Sample], object]:
    """Real samples of the toy writer/critic team from a tiny llama, with tree advantages."""
    policy = tiny_policy("llama", seed=seed)
    algo = AlgorithmConfig(k=k)
    samples, episodes = run_episodes(ToyWorkflow(max_turns=1), list(range(instances)), "train", {"p": policy},
                                     {"a": "p", "b": "p"}, SamplingParams(max_new_tokens=5), k,
                                     RewardWeights(1.0, 1.0), torch.Generator().manual_seed(seed),
                                     random.Random(seed))
    assign_advantages(samples, episodes, algo)
    return samples, policy


def sgd_state(policy, reference=None) -> PolicyOptimizer:
    """Plain SGD with lr 1: the parameter change of one step is minus the gradient used."""
    params = [p for p in policy.model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=1.0)
    return PolicyOptimizer(policy, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0), reference)


def flat_params(policy) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in policy.model.parameters()])
