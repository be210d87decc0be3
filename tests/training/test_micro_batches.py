"""Length buckets and token-budget micro-batches: the layout changes, the gradient does not."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import os
import random
import subprocess
import sys

import pytest
import torch

from update_fixtures import policy_optimizer, synthetic_samples

from teamrl.config import AlgorithmConfig, ConfigError, TrainConfig
from teamrl.diagnostics.gradients import RoleGradients
from teamrl.policies.scoring import bf16_body, shared_prefix_logprobs
from teamrl.training.micro_batches import length_buckets, padded_cells, plan_micro_batches
from teamrl.training.update import PolicyOptimizer, _minibatch_step, adamw

# Gradients of one big batch vs micro-batches differ only by float32 summation order.
ATOL, RTOL = 1e-6, 1e-5


def _brute_force_cost(lengths, call_cost):
    """Least cost over every way of cutting the sorted lengths into runs (2^(n-1) cuts)."""
    ordered = sorted(lengths)
    best = float("inf")
    for cuts in itertools.product([False, True], repeat=len(ordered) - 1):
        cost, start = 0.0, 0
        for end in range(1, len(ordered) + 1):
            if end == len(ordered) or cuts[end - 1]:
                cost += (end - start) * ordered[end - 1] + call_cost
                start = end
        best = min(best, cost)
    return best


def _cost(lengths, buckets, call_cost):
    return sum(len(b) * max(lengths[i] for i in b) + call_cost for b in buckets)


def test_length_buckets_hand_computed():
    # sorted 1, 2, 30, 31: [1, 2] costs 2 x 2 + 10, [30, 31] costs 2 x 31 + 10: 86 < 4 x 31 + 10 = 134
    assert length_buckets([30, 1, 31, 2], call_cost=10.0) == [[1, 3], [0, 2]]
    assert length_buckets([30, 1, 31, 2], call_cost=1000.0) == [[1, 3, 0, 2]]
    assert length_buckets([], call_cost=1.0) == []


@pytest.mark.parametrize("seed", range(6))
def test_length_buckets_are_optimal_and_cover_every_index_once(seed):
    rng = random.Random(seed)
    lengths = [rng.randint(1, 40) for _ in range(rng.randint(1, 9))]
    call_cost = rng.choice([0.0, 5.0, 30.0])
    buckets = length_buckets(lengths, call_cost)
    assert sorted(i for b in buckets for i in b) == list(range(len(lengths)))
    assert _cost(lengths, buckets, call_cost) == pytest.approx(_brute_force_cost(lengths, call_cost))


def test_length_buckets_respect_the_budget_except_for_an_oversized_item():
    lengths, sizes = [3, 3, 3, 3, 50], [10, 10, 10, 10, 80]
    buckets = length_buckets(lengths, call_cost=1000.0, sizes=sizes, budget=25)
    assert [sum(sizes[i] for i in b) for b in buckets] == [20, 20, 80]
    with pytest.raises(ValueError, match="call_cost"):
        length_buckets([1], call_cost=-1.0)


def test_plan_keeps_prompt_groups_together_and_splits_an_oversized_one():
    prompts = [(1,) * 5] * 3 + [(2,) * 20] * 2
    responses = [4, 6, 2, 9, 1]
    plan = plan_micro_batches(prompts, responses, token_budget=20, call_cost=64.0)
    assert sorted(i for b in plan for i in b) == list(range(5))
    assert [sorted(b) for b in plan] == [[0, 1, 2], [4], [3]]  # the 20-token prompt's group exceeds 20 alone
    one = plan_micro_batches(prompts, responses, token_budget=0, call_cost=None)
    assert one == [[0, 1, 2, 3, 4]]
    assert padded_cells([5, 20], responses) == 2 * 20 + 5 * 9


def _samples():
    return synthetic_samples(prompts=6)  # response lengths 1..13, prompts of 6..11 tokens, two roles


def _gradient(algo, tracker=False, kl=False):
    """The summed gradient _minibatch_step hands the optimizer (SGD lr 0: nothing moves)."""
    state = policy_optimizer()
    params = list(state.policy.model.parameters())
    opt = torch.optim.SGD(params, lr=0.0)
    reference = None
    if kl:
        reference = copy.deepcopy(state.policy.model).requires_grad_(False)
        with torch.no_grad():
            for p in reference.parameters():
                p.add_(0.05 * torch.randn_like(p))
    state = PolicyOptimizer(state.policy, opt, state.scheduler, reference)
    roles = RoleGradients(params) if tracker else None
    _minibatch_step(state, _samples(), algo, 1.0, 0.0, state.policy.tokenizer.pad_token_id, roles)
    return torch.cat([p.grad.reshape(-1) for p in params])


VARIANTS = [dict(aggregation="token-mean"), dict(aggregation="seq-mean-token-mean"),
            dict(aggregation="seq-mean-token-sum"), dict(aggregation="token-mean", role_balanced=True),
            dict(aggregation="seq-mean-token-mean", entropy_coef=0.05, kl_coef=0.2)]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(f"{k}={v[k]}" for k in v))
@pytest.mark.parametrize("tracker", [False, True], ids=["one-backward", "per-role-split"])
def test_micro_batches_give_the_one_big_batch_gradient(variant, tracker):
    base = dataclasses.replace(AlgorithmConfig(), **variant)
    kl = variant.get("kl_coef", 0.0) > 0
    big = _gradient(dataclasses.replace(base, micro_batch_tokens=0, length_buckets=False), tracker, kl)
    assert big.abs().max() > 1e-4  # the loss has a gradient to compare
    samples = _samples()
    prompts = [tuple(s.generation.prompt_ids) for s in samples]
    lengths = [len(s.generation.response_ids) for s in samples]
    for budget, call_cost in [(30, 64), (45, 0), (0, 0)]:
        plan = plan_micro_batches(prompts, lengths, budget, call_cost)
        assert len(plan) > 1  # the layout really differs from one big batch
        algo = dataclasses.replace(base, micro_batch_tokens=budget, bucket_call_tokens=call_cost)
        torch.testing.assert_close(_gradient(algo, tracker, kl), big, atol=ATOL, rtol=RTOL)


def test_response_buckets_give_the_one_forward_logprobs():
    state = policy_optimizer()
    model, pad = state.policy.model, state.policy.tokenizer.pad_token_id
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(4, 90, (n,), generator=gen).tolist() for n in (3, 8)]
    responses = [torch.randint(4, 90, (n,), generator=gen).tolist() for n in (1, 12, 5, 2, 9)]
    index = [0, 0, 1, 1, 0]
    temps = torch.tensor([1.0, 0.7, 1.0, 1.3, 1.0])
    one = shared_prefix_logprobs(model, prompts, responses, index, pad, temps, with_entropy=True)
    buckets = length_buckets([len(r) for r in responses], call_cost=0.0)
    assert len(buckets) == 5
    split = shared_prefix_logprobs(model, prompts, responses, index, pad, temps, with_entropy=True,
                                   response_buckets=buckets)
    torch.testing.assert_close(split[1], one[1], atol=0, rtol=0)
    for a, b in ((split[0], one[0]), (split[2], one[2])):
        torch.testing.assert_close(a * one[1], b * one[1], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="every response index"):
        shared_prefix_logprobs(model, prompts, responses, index, pad, response_buckets=[[0, 1], [2]])


def test_bad_update_settings_fail_at_config_load_with_the_fix():
    with pytest.raises(ConfigError, match="micro_batch_tokens = -5 is invalid: expected an integer >= 0"):
        AlgorithmConfig(micro_batch_tokens=-5)
    with pytest.raises(ConfigError, match="autocast = 'fp16' is invalid: expected off or bf16"):
        AlgorithmConfig(autocast="fp16")
    with pytest.raises(ConfigError, match="adamw = 'adam' is invalid: expected fused, foreach or for-loop"):
        TrainConfig(adamw="adam")


def test_bf16_body_keeps_the_head_and_logits_fp32_and_restores_the_model():
    model = policy_optimizer().policy.model
    ids = torch.randint(4, 90, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        exact = model(input_ids=ids).logits
        with bf16_body(model):
            fast = model(input_ids=ids).logits
        after = model(input_ids=ids).logits
    assert fast.dtype == torch.float32  # the head ran outside autocast
    assert 0 < float((fast - exact).abs().max()) < 0.05  # the body did run in bf16, close to fp32
    assert "forward" not in model.get_output_embeddings().__dict__
    torch.testing.assert_close(after, exact, atol=0, rtol=0)


PEAK_SCRIPT = """
import time, torch
from teamrl.training.memory import PeakMemory
with PeakMemory(torch.device("cpu")) as peak:
    block = torch.ones(64 * 2**20 // 4)  # 64 MiB, written (so resident)
    deadline = time.monotonic() + 5
    while peak._high - peak._start < 64 * 2**20 and time.monotonic() < deadline:
        time.sleep(0.01)
    del block
print(peak.mb)
"""


def test_peak_memory_sees_a_transient_allocation_on_cpu():
    # In a process of its own: the measure is the resident set's growth, and in the full suite other tests'
    # leftover threads free and touch memory meanwhile (the same check in-process once saw 39 of 64 MiB).
    done = subprocess.run([sys.executable, "-c", PEAK_SCRIPT], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert 48 < float(done.stdout.split()[-1]) < 256


def test_adamw_implementations_take_the_same_steps():
    results = {}
    for impl in ("fused", "foreach", "for-loop"):
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(n)) for n in (3, 17, 64)]
        opt = adamw(params, 1e-2, 0.01, impl)
        assert opt.defaults["fused"] is (True if impl == "fused" else None)
        for step in range(3):
            for p in params:
                p.grad = torch.sin(p.detach() * (step + 1))
            opt.step()
        results[impl] = torch.cat([p.detach() for p in params])
    torch.testing.assert_close(results["fused"], results["for-loop"], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(results["foreach"], results["for-loop"], atol=1e-6, rtol=1e-6)
    with pytest.raises(ValueError, match="use fused, foreach or for-loop"):
        adamw(params, 1e-2, 0.0, "lion")
