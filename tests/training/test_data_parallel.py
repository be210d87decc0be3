"""Data parallelism within one policy: two gloo workers reproduce the single-process update."""

import dataclasses
import random
import socket

import pytest
import torch
import torch.multiprocessing as mp

from teamrl.config import AlgorithmConfig
from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.rollout.engine import Generation
from teamrl.rollout.tree import Sample
from teamrl.training.data_parallel import GradSync, init_group, leave_group, share_bounds
from teamrl.training.update import PolicyOptimizer, update_policy
from teamrl.workflows.base import Outcome

# (aggregation, role_balanced): the weights of the shares differ in each.
VARIANTS = [("token-mean", False), ("seq-mean-token-mean", False)]
if hasattr(AlgorithmConfig(), "role_balanced"):
    VARIANTS.append(("token-mean", True))


def _gen(prompt, length, gen):
    response = torch.randint(4, 90, (length,), generator=gen).tolist()
    # old log-probs away from the current ones so that ratios differ from 1 and some are clipped
    logprobs = (-4.5 + 0.3 * torch.randn(length, generator=gen)).tolist()
    return Generation(prompt, response, logprobs, logprobs, "", True)


def _samples():
    """Groups of 3 candidates per prompt, two roles, responses of very unequal lengths."""
    gen = torch.Generator().manual_seed(7)
    samples = []
    for i in range(5):
        prompt = torch.randint(4, 90, (6 + i,), generator=gen).tolist()
        role = "tool" if i % 2 else "plan"
        for k in range(3):
            length = [1, 9, 4, 13, 2][(i + k) % 5]
            samples.append(Sample(_gen(prompt, length, gen), Outcome(0.0, 0.0), 0.0, i, i, 0, role, role,
                                  "p", advantage=float(torch.randn(1, generator=gen))))
    return samples


def _state() -> PolicyOptimizer:
    tok = build_char_tokenizer()
    model = build_tiny_model(tok, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, seed=3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return PolicyOptimizer(Policy("p", model, tok, False), optimizer, scheduler, None)


def _algo(aggregation, balanced):
    algo = dataclasses.replace(AlgorithmConfig(), aggregation=aggregation, minibatch_size=7, ppo_epochs=2)
    if balanced:
        algo = dataclasses.replace(algo, role_balanced=True)
    return algo


def _update(state, aggregation, balanced):
    metrics = update_policy(state, _samples(), _algo(aggregation, balanced), 1.0, 0.5, random.Random(11))
    weights = {k: v.detach().clone() for k, v in state.policy.model.state_dict().items()}
    return metrics, weights


def _worker(rank, world_size, port, out_path):
    torch.set_num_threads(1)
    sync = init_group(rank, world_size, "127.0.0.1", port)
    results = []
    for aggregation, balanced in VARIANTS:
        state = _state()
        state.grad_sync = sync
        results.append(_update(state, aggregation, balanced))
    if rank == 0:
        torch.save(results, out_path)
    leave_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_share_bounds_cover_every_item_once():
    assert [share_bounds(5, r, 2) for r in range(2)] == [(0, 2), (2, 5)]
    assert [share_bounds(1, r, 3) for r in range(3)] == [(0, 0), (0, 0), (0, 1)]


def test_shard_weights_a_share_by_its_units():
    samples = _samples()[:3]  # response lengths 1, 9, 4
    tokens = lambda part: float(sum(len(s.generation.response_ids) for s in part))  # noqa: E731
    first, w0 = GradSync(0, 2).shard(samples, 0.5, tokens)
    second, w1 = GradSync(1, 2).shard(samples, 0.5, tokens)
    assert first == samples[:1] and second == samples[1:]
    assert w0 == pytest.approx(0.5 * 1 / 14) and w1 == pytest.approx(0.5 * 13 / 14)
    _, w_seq = GradSync(1, 2).shard(samples, 1.0, lambda part: float(len(part)))
    assert w_seq == pytest.approx(2 / 3)


def test_two_gloo_workers_match_one_process(tmp_path):
    out = tmp_path / "rank0.pt"
    mp.spawn(_worker, args=(2, _free_port(), str(out)), nprocs=2, join=True)
    distributed = torch.load(out)
    for (aggregation, balanced), (dp_metrics, dp_weights) in zip(VARIANTS, distributed):
        metrics, weights = _update(_state(), aggregation, balanced)
        changed = 0
        for name, value in weights.items():
            torch.testing.assert_close(dp_weights[name], value, atol=1e-5, rtol=0, msg=name)
            changed += int(not torch.equal(value, _state().policy.model.state_dict()[name]))
        assert changed > 0  # the update did move the weights
        assert dp_metrics.keys() == metrics.keys()
        for key, value in metrics.items():
            assert dp_metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-6), (aggregation, balanced, key)
