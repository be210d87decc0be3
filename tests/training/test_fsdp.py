"""FSDP2 within one policy: two gloo ranks holding half of everything reproduce the single-process update."""

import dataclasses
import random
import socket

import pytest
import torch
import torch.multiprocessing as mp

from update_fixtures import lora_optimizers, policy_optimizer, synthetic_samples

from teamrl.config import AlgorithmConfig
from teamrl.training.data_parallel import init_group, leave_group
from teamrl.training.update import update_policy

# Weights are compared to 1e-5 absolute (fp32; the reduce-scatter sums in another order than one backward),
# metrics to 1e-4 relative, as for the all-reduce data parallelism in test_data_parallel.py.
ATOL, RTOL_METRICS = 1e-5, 1e-4

# name -> (algorithm changes, samples): token- and sequence-weighted shares, per-role parts, a KL reference
# (sharded too), minibatches of a single sample, where one rank's share is empty (its zero-weight pass), and
# recomputed MLPs (policy.activation_checkpointing) inside the FSDP units.
VARIANTS = {
    "token-mean": ({}, None),
    "seq-mean": ({"aggregation": "seq-mean-token-mean"}, None),
    "role-balanced+kl": ({"role_balanced": True, "kl_coef": 0.1}, None),
    "empty-share": ({"minibatch_size": 1}, -2),
    "checkpointed": ({"kl_coef": 0.1}, None),
}


def _algo(changes):
    return dataclasses.replace(AlgorithmConfig(), **{"minibatch_size": 7, "ppo_epochs": 2, **changes})


def _samples(cut):
    samples = synthetic_samples()
    return samples[:cut] if cut else samples  # cut -2: the last prompt keeps one candidate


def _make(variant, lora):
    if lora:
        return lora_optimizers(("plan", "tool"), with_reference=True)
    changes, _ = VARIANTS[variant]
    state = policy_optimizer()
    if variant == "checkpointed":
        from teamrl.policies.loading import enable_activation_checkpointing

        enable_activation_checkpointing(state.policy.network)
    if changes.get("kl_coef"):
        import copy

        state.reference = copy.deepcopy(state.policy.model).eval().requires_grad_(False)
    return {"p": state}


def _update(states, variant):
    """Each policy's update; returns its metrics and, as (name -> tensor), its trained weights and AdamW moments."""
    from teamrl.training.backends.fsdp import gather_optimizer_state, gather_trained_weights

    changes, cut = VARIANTS[variant]
    out = {}
    for name, state in states.items():
        metrics = update_policy(state, _samples(cut), _algo(changes), 1.0, 0.5, random.Random(11))
        moments = gather_optimizer_state(state)["state"]
        out[name] = (metrics, gather_trained_weights(state), {i: s["exp_avg_sq"] for i, s in moments.items()})
    return out


def _worker(rank, world_size, port, out_path, lora):
    from teamrl.training.backends.fsdp import shard_states

    torch.set_num_threads(1)
    init_group(rank, world_size, "127.0.0.1", port)
    results = {}
    for variant in (["role-balanced+kl"] if lora else VARIANTS):
        states = _make(variant, lora)
        shard_states(states, rank, world_size, "cpu")
        local = next(iter(states.values())).policy.network.model.embed_tokens.weight if not lora else None
        if local is not None:  # each rank really holds half of the embedding, not all of it
            assert 0 < local.to_local().shape[0] <= -(-local.shape[0] // world_size) < local.shape[0]
        results[variant] = _update(states, variant)
    if rank == 0:
        torch.save(results, out_path)
    # Both ranks leave together: a rank that tears gloo down while the other still uses it can abort.
    torch.distributed.barrier()
    leave_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _compare(distributed, lora):
    for variant, by_policy in distributed.items():
        reference = _make(variant, lora)
        initial = {n: {k: v.clone() for k, v in s.policy.network.named_parameters()} for n, s in _make(variant, lora).items()}
        one = _update(reference, variant)
        for name, (metrics, weights, moments) in by_policy.items():
            ref_metrics, ref_weights, ref_moments = one[name]
            assert weights.keys() == ref_weights.keys() and weights
            for key, value in ref_weights.items():
                torch.testing.assert_close(weights[key], value, atol=ATOL, rtol=0, msg=f"{variant} {name} {key}")
            assert any(not torch.equal(initial[name][k], v) for k, v in ref_weights.items())  # the update moved them
            for index, value in ref_moments.items():
                torch.testing.assert_close(moments[index], value, atol=1e-8, rtol=1e-3, msg=f"{variant} moment")
            assert metrics.keys() == ref_metrics.keys()
            for key, value in ref_metrics.items():
                if key == "peak_memory_mb":  # measured, not computed: sharding exists to change it
                    continue
                assert metrics[key] == pytest.approx(value, rel=RTOL_METRICS, abs=1e-6), (variant, name, key)


def test_fsdp_two_gloo_ranks_match_one_process(tmp_path):
    out = tmp_path / "rank0.pt"
    mp.spawn(_worker, args=(2, _free_port(), str(out), False), nprocs=2, join=True)
    _compare(torch.load(out), lora=False)


def test_fsdp_lora_adapters_on_one_sharded_base_match_one_process(tmp_path):
    out = tmp_path / "rank0.pt"
    mp.spawn(_worker, args=(2, _free_port(), str(out), True), nprocs=2, join=True)
    distributed = torch.load(out)
    _compare(distributed, lora=True)
    for name, (_, weights, _) in distributed["role-balanced+kl"].items():
        assert weights and all("lora_" in k and f".{name}." in k for k in weights)  # only its own adapter
