"""Data parallelism within one policy: two gloo workers reproduce the single-process update."""

import dataclasses
import random
import socket

import pytest
import torch
import torch.multiprocessing as mp

from update_fixtures import policy_optimizer, synthetic_samples

from teamrl.config import AlgorithmConfig
from teamrl.training.data_parallel import GradSync, init_group, leave_group, share_bounds
from teamrl.training.update import update_policy

# (aggregation, role_balanced, rollout_correction): the weights of the shares differ in each; with a
# correction every worker scores the whole batch for pi_prox and weights its share's tokens.
VARIANTS = [("token-mean", False, "none"), ("seq-mean-token-mean", False, "none"), ("token-mean", False, "tis")]
if hasattr(AlgorithmConfig(), "role_balanced"):
    VARIANTS.append(("token-mean", True, "none"))


# How far apart the two runs' weights may end: sharding changes the forwards' shapes, hence the last bits.
# The tis variant is more sensitive to those bits: single-process runs whose initial weights differed by
# a relative 1e-7 ended 1.4e-5 to 2.8e-5 apart with tis, 1.3e-6 to 6.6e-6 without (the weights moved by up
# to 5.7e-2).
_TOLERANCE = {"none": 1e-5, "tis": 1e-4}


def _algo(aggregation, balanced, correction):
    algo = dataclasses.replace(AlgorithmConfig(), aggregation=aggregation, minibatch_size=7, ppo_epochs=2,
                               rollout_correction=correction)
    if balanced:
        algo = dataclasses.replace(algo, role_balanced=True)
    return algo


def _update(state, aggregation, balanced, correction):
    metrics = update_policy(state, synthetic_samples(), _algo(aggregation, balanced, correction), 1.0, 0.5,
                            random.Random(11))
    weights = {k: v.detach().clone() for k, v in state.policy.model.state_dict().items()}
    return metrics, weights


def _worker(rank, world_size, port, out_path):
    torch.set_num_threads(1)
    sync = init_group(rank, world_size, "127.0.0.1", port)
    results = []
    for variant in VARIANTS:
        state = policy_optimizer()
        state.grad_sync = sync
        results.append(_update(state, *variant))
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
    samples = synthetic_samples()[:3]  # response lengths 1, 9, 4
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
    for (aggregation, balanced, correction), (dp_metrics, dp_weights) in zip(VARIANTS, distributed):
        metrics, weights = _update(policy_optimizer(), aggregation, balanced, correction)
        changed = 0
        for name, value in weights.items():
            torch.testing.assert_close(dp_weights[name], value, atol=_TOLERANCE[correction], rtol=0, msg=name)
            changed += int(not torch.equal(value, policy_optimizer().policy.model.state_dict()[name]))
        assert changed > 0  # the update did move the weights
        assert dp_metrics.keys() == metrics.keys()
        for key, value in metrics.items():
            if key == "peak_memory_mb":  # measured, not computed: differs between processes
                continue
            assert dp_metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-6), (aggregation, balanced, correction, key)
