"""The bf16 sampler: draws from bf16 copies of the weights, reports that model's log-probs, and follows updates."""

import pytest
import torch

from teamrl.policies.cpu_linear import sampler_weight_version, use_onednn_linears
from teamrl.rollout.builtin_engine import SamplingParams, sample
from toy import tiny_policy

PROMPTS = ["tool\n#..S\n..G.\n>", "ab", "plan\nstart=(0,1) goal=(2,3)\n>"]
BF16_GAP = 0.05
"""Bound on |bf16 - fp32| log-prob per token of the tiny model (2 layers, 32 wide, log-probs near -4.6): bf16
keeps 8 bits of mantissa, a relative error of 2^-9 per rounding; measured max about 1e-3."""


def _draw(policy, dtype: str, seed: int = 0):
    prompts = [policy.encode_prompt(p) for p in PROMPTS]
    params = SamplingParams(max_new_tokens=8, dtype=dtype)
    return [g for group in sample(policy, prompts, 3, params, torch.Generator().manual_seed(seed)) for g in group]


def _linears(policy) -> list[torch.nn.Linear]:
    return [m for m in policy.model.modules() if isinstance(m, torch.nn.Linear)]


def _gaps(policy) -> list[float]:
    """|bf16 - fp32| log-prob of each token both samplers drew alike (their common prefix of each row)."""
    gaps = []
    for fp32, bf16 in zip(_draw(policy, "float32"), _draw(policy, "bfloat16")):
        for a, b, x, y in zip(fp32.response_ids, bf16.response_ids, fp32.logprobs, bf16.logprobs):
            if a != b:
                break
            gaps.append(abs(x - y))
    return gaps


def test_bf16_log_probs_differ_from_fp32_by_a_small_bounded_gap():
    policy = tiny_policy()
    gaps = _gaps(policy)
    assert len(gaps) > 20
    assert max(gaps) > 1e-5  # another arithmetic: the float32 sampler's own run-to-run gap is 0
    assert max(gaps) < BF16_GAP
    assert all(g == 0 for g in (abs(a - b) for x, y in zip(_draw(policy, "float32"), _draw(policy, "float32"))
                                for a, b in zip(x.logprobs, y.logprobs)))


def test_the_sampler_reads_bf16_copies_and_refreshes_them_after_an_update():
    policy = tiny_policy()
    layers = _linears(policy)
    _draw(policy, "bfloat16")
    assert all(sampler_weight_version(m.weight) == m.weight._version for m in layers)  # every layer has a copy
    before = [g.logprobs for g in _draw(policy, "bfloat16")]

    optimizer = torch.optim.SGD(policy.model.parameters(), lr=0.5)
    ids = torch.tensor([policy.encode_prompt(PROMPTS[0])])
    policy.model.train()
    policy.model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    policy.model.eval()
    stale = [m for m in layers if sampler_weight_version(m.weight) != m.weight._version]
    assert stale  # the step moved the trainer's weights past the copies

    after = [g.logprobs for g in _draw(policy, "bfloat16")]
    assert all(sampler_weight_version(m.weight) == m.weight._version for m in layers)  # refreshed
    assert after != before
    assert all(m.weight.dtype == torch.float32 for m in layers)  # the trainer's master weights stay fp32
    gaps = _gaps(policy)
    assert gaps and max(gaps) < BF16_GAP  # the copy is of the updated weights, not of the old ones


def test_a_float32_sampler_makes_no_copies():
    policy = tiny_policy()
    _draw(policy, "float32")
    assert all(sampler_weight_version(m.weight) is None for m in _linears(policy))


def test_a_lora_policy_copies_its_frozen_base_once_and_follows_its_adapter():
    from test_lora_rows import lora_team

    policy = lora_team(names=("plan",))[0]
    bases = [m.base_layer for m in policy.model.modules() if hasattr(m, "base_layer")]
    assert bases
    before = _draw(policy, "bfloat16")
    made = [sampler_weight_version(b.weight) for b in bases]
    assert None not in made  # the base layers were read from bf16 copies
    with torch.no_grad():  # an adapter update: only lora_B moves
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.mul_(-1.0)
    after = _draw(policy, "bfloat16")
    assert [sampler_weight_version(b.weight) for b in bases] == made  # the frozen base was not copied again
    assert [g.logprobs for g in after] != [g.logprobs for g in before]  # the new adapter reached the sampler
    gaps = _gaps(policy)
    # this base is sharper than tiny_policy's (larger logits): measured max 0.10-0.15 with the adapter and
    # without, mean 0.02
    assert gaps and max(gaps) < 0.3 and sum(gaps) / len(gaps) < 0.05


def test_the_trainers_own_autocast_makes_no_sampler_copies():
    """`algorithm.autocast: bf16` forwards without gradients (pi_prox, the reference) keep autocast's casts."""
    policy = tiny_policy()
    if use_onednn_linears(policy.model, min_weights=0) == 0:  # the layers whose forward reads `linear`
        pytest.skip("this torch has no oneDNN linear")
    ids = torch.tensor([policy.encode_prompt(PROMPTS[0])])
    _draw(policy, "float32")  # a sampling call before: nothing of it stays switched on
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        policy.model(input_ids=ids)
    assert all(sampler_weight_version(m.weight) is None for m in _linears(policy))


def test_the_bf16_sampler_keeps_lora_factors_and_attention_out_of_autocast(monkeypatch):
    """Under the bf16 sampler the rank-r LoRA factors and the attention over the cache run in fp32 with autocast
    off (autocast would cast the factors and the whole cache at every step); the base projections stay bf16."""
    from test_lora_rows import lora_team

    from teamrl.rollout import lean_decode, lora_rows

    policy = lora_team(names=("plan",))[0]
    deltas, attends = [], []
    real_delta, real_attend = lora_rows._lora_delta, lean_decode.LeanDecoder._attend_exact

    def delta(x, a, b):
        deltas.append((torch.is_autocast_enabled("cpu"), a.dtype, b.dtype))
        return real_delta(x, a, b)

    def attend(self, i, q):
        attends.append((torch.is_autocast_enabled("cpu"), q.dtype, self.k_prompt[i].dtype, self.v_prompt[i].dtype))
        return real_attend(self, i, q)

    monkeypatch.setattr(lora_rows, "_lora_delta", delta)
    monkeypatch.setattr(lean_decode.LeanDecoder, "_attend_exact", attend)
    _draw(policy, "bfloat16")
    assert deltas and attends
    assert set(deltas) == {(False, torch.float32, torch.float32)}  # x may come in bf16: it is cast to the factors
    assert {a[0] for a in attends} == {False} and all(len(set(a[1:])) == 1 for a in attends)
