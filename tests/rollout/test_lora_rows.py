"""LoRA adapters on the lean decode path, one adapter or several in one batch, against PEFT applied one
adapter at a time through the HF forward."""

import pytest
import torch

from teamrl.config import LoraConfig
from teamrl.policies.loading import Policy
from teamrl.policies.lora import activate, attach_adapters
from teamrl.policies.scoring import left_pad
from teamrl.rollout import decoding
from teamrl.rollout import builtin_engine as builtin
from teamrl.rollout.decoding import HFDecoder, open_decoder
from teamrl.rollout.builtin_engine import SamplingParams, can_sample_together, sample, sample_together
from teamrl.rollout.engine_routing import sample_many
from teamrl.rollout.sampler import SampleRequest
from teamrl.rollout.lean_decode import LeanDecoder, lean_unsupported
from teamrl.rollout.lora_rows import RowAdapters
from test_kv_cache import context_sensitive_policy
from test_lean_decode import hf_next_logits

PROMPTS = ["tool\n#..S\n..G.\n>", "ab", "plan\nstart=(0,1) goal=(2,3)\n>", "xyz?"]
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "down_proj")


def lora_team(arch: str = "llama", names=("plan", "tool")) -> list[Policy]:
    """LoRA policies on one context-sensitive base, each adapter's B made non-zero (PEFT starts B at zero,
    where every adapter equals the base and a mix-up of adapters could not show)."""
    base = context_sensitive_policy(arch)
    network = attach_adapters(base.model, {n: LoraConfig(r=4, alpha=8, target_modules=list(TARGETS)) for n in names})
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in network.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    network.eval()
    return [Policy(n, network, base.tokenizer, False, adapter=n) for n in names]


def reference_logits(policy: Policy, sequences: list[list[int]]) -> torch.Tensor:
    """PEFT's own forward with this policy's adapter active, no cache, over each whole sequence."""
    return hf_next_logits(policy.model, sequences, policy.tokenizer.pad_token_id)


def test_row_blocks_follow_the_rows_that_stay():
    rows = RowAdapters.blocks(["a", "b", "c"], [4, 2, 3])
    assert rows.spans() == [("a", 0, 4), ("b", 4, 6), ("c", 6, 9)]
    kept = rows.keep(torch.tensor([1, 3, 4, 7]))  # a keeps 2 rows, b 1, c 1
    assert kept.spans() == [("a", 0, 2), ("b", 2, 3), ("c", 3, 4)]
    assert kept.keep(torch.tensor([0, 1, 3])).spans() == [("a", 0, 2), ("c", 2, 3)]  # b left entirely


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_one_adapter_decodes_on_the_lean_path_with_peft_logits(arch):
    team = lora_team(arch)
    policy = team[1]
    prompts = [policy.encode_prompt(p) for p in PROMPTS]
    ids, mask = left_pad(prompts, policy.tokenizer.pad_token_id)
    k, steps = 2, 5
    with torch.no_grad():
        decoder = open_decoder(policy.model, ids, mask, k, steps)
        assert isinstance(decoder, LeanDecoder)
        assert (decoder.prefill_logits - reference_logits(policy, prompts)).abs().max() < 1e-5
        # the adapter matters: the base alone is far from these logits
        with policy.network.disable_adapter():
            base = hf_next_logits(policy.network, prompts, policy.tokenizer.pad_token_id)
        assert (decoder.prefill_logits - base).abs().max() > 0.1
        rows = [prompts[i // k] for i in range(len(prompts) * k)]
        generator = torch.Generator().manual_seed(0)
        worst = 0.0
        for step in range(steps):
            if step == 2:
                keep = [0, 3, 4, 7]
                decoder.keep(torch.tensor(keep))
                rows = [rows[r] for r in keep]
            fed = torch.randint(3, len(policy.tokenizer), (len(rows),), generator=generator)
            rows = [seq + [int(t)] for seq, t in zip(rows, fed)]
            want = reference_logits(policy, rows)
            worst = max(worst, float((decoder.step(fed) - want).abs().max() / want.abs().max()))
    assert worst < 1e-5, worst  # relative to the largest logit (fp32 sums in another order)


@pytest.mark.parametrize("system", ["", "system: plan a path, then stop.\n"])
def test_rows_of_two_adapters_in_one_call_get_each_adapters_logits(system):
    """With a shared system prefix, the two-prompt block prefills it once and is narrower than the others."""
    team = lora_team(names=("plan", "tool", "check"))
    network = team[0].network
    blocks = [(team[0], PROMPTS[:1]), (team[1], PROMPTS[1:3]), (team[2], PROMPTS[3:])]
    if system:  # tool's two short prompts share it: that block's prefill is narrower and widened to the call's
        blocks = [(team[0], [system + PROMPTS[2]]), (team[1], [system + PROMPTS[1], system + PROMPTS[3]]),
                  (team[2], PROMPTS[:1])]
    prompts = [p.encode_prompt(text) for p, texts in blocks for text in texts]
    owner = [p for p, texts in blocks for _ in texts]
    ids, mask = left_pad(prompts, team[0].tokenizer.pad_token_id)
    k, steps = 3, 5
    with torch.no_grad():
        decoder = open_decoder(network, ids, mask, k, steps,
                               adapter_blocks=(["plan", "tool", "check"], [len(t) for _, t in blocks]))
        assert isinstance(decoder, LeanDecoder)
        want = torch.cat([reference_logits(p, [s]) for p, s in zip(owner, prompts)])
        assert (decoder.prefill_logits - want).abs().max() < 1e-5
        rows = [(owner[i // k], prompts[i // k]) for i in range(len(prompts) * k)]
        generator = torch.Generator().manual_seed(0)
        worst = 0.0
        for step in range(steps):
            if step == 2:  # rows leave from every block, and adapter plan's only prompt leaves entirely
                keep = [r for r in range(len(rows)) if r not in (0, 1, 2, 4, 10)]
                decoder.keep(torch.tensor(keep))
                rows = [rows[r] for r in keep]
            fed = torch.randint(3, len(team[0].tokenizer), (len(rows),), generator=generator)
            rows = [(p, seq + [int(t)]) for (p, seq), t in zip(rows, fed)]
            got = decoder.step(fed)
            want = torch.cat([reference_logits(p, [seq]) for p, seq in rows])
            worst = max(worst, float((got - want).abs().max() / want.abs().max()))
    assert worst < 1e-5, worst  # relative to the largest logit


def test_sampling_together_gives_each_policy_its_own_tokens_and_logprobs():
    team = lora_team()
    prompts = [[team[0].encode_prompt(t) for t in PROMPTS[:2]], [team[1].encode_prompt(t) for t in PROMPTS[2:]]]
    greedy = SamplingParams(temperature=0, max_new_tokens=8)
    assert can_sample_together(team, prompts, 2, greedy)
    together = sample_together(team, prompts, 2, greedy, torch.Generator().manual_seed(0))
    for policy, group_prompts, got in zip(team, prompts, together, strict=True):
        alone = sample(policy, group_prompts, 2, greedy, torch.Generator().manual_seed(0))
        for got_group, want_group in zip(got, alone, strict=True):
            for have, want in zip(got_group, want_group, strict=True):
                assert have.response_ids == want.response_ids
                assert have.logprobs == pytest.approx(want.logprobs, abs=1e-5)
    # sampled: each token's log-prob is the one its own adapter gives it (teacher-forced through PEFT)
    hot = SamplingParams(temperature=1.0, max_new_tokens=6)
    drawn = sample_together(team, prompts, 3, hot, torch.Generator().manual_seed(3))
    checked = 0
    for policy, groups in zip(team, drawn):
        for gens in groups:
            for gen in gens:
                for t in range(len(gen.response_ids)):
                    logits = reference_logits(policy, [gen.prompt_ids + gen.response_ids[:t]])[0]
                    want = torch.log_softmax(logits, -1)[gen.response_ids[t]]
                    assert gen.logprobs[t] == pytest.approx(float(want), abs=1e-5)
                    checked += 1
    assert checked > 20


def test_sample_many_sends_lora_requests_of_one_base_to_one_decode_call(monkeypatch):
    team = lora_team()
    calls = []
    real_open = builtin.open_decoder
    monkeypatch.setattr(builtin, "open_decoder", lambda *a, **kw: calls.append(kw.get("adapter_blocks")) or real_open(*a, **kw))
    params = SamplingParams(temperature=1.0, max_new_tokens=4)
    requests = [SampleRequest(p, [p.encode_prompt(t) for t in PROMPTS[:2]], 2, params) for p in team]
    out = sample_many(requests, torch.Generator().manual_seed(0))
    assert calls == [(["plan", "tool"], [2, 2])]
    assert [len(groups) for groups in out] == [2, 2] and all(len(g) == 2 for groups in out for g in groups)
    # different settings: two calls, in order
    calls.clear()
    other = SampleRequest(team[1], requests[1].prompts, 2, SamplingParams(temperature=0.5, max_new_tokens=4))
    sample_many([requests[0], other], torch.Generator().manual_seed(0))
    assert calls == [None, None]


def test_activation_after_a_shared_call_still_drops_the_other_adapters_gradients():
    team = lora_team()
    prompts = [[team[0].encode_prompt("ab")], [team[1].encode_prompt("xyz?")]]
    network = team[0].network
    activate(network, "plan")
    for name, param in network.named_parameters():
        if ".plan." in name:
            param.grad = torch.ones_like(param)
    sample_together(team, prompts, 2, SamplingParams(max_new_tokens=3), torch.Generator().manual_seed(0))
    team[1].model  # the policy that runs next
    assert all(p.grad is None for n, p in network.named_parameters() if ".plan." in n)


def test_lora_variants_and_the_switch_fall_back_to_the_hf_forward(monkeypatch):
    peft = pytest.importorskip("peft")
    base = context_sensitive_policy("llama")
    dora = peft.get_peft_model(base.model, peft.LoraConfig(r=2, target_modules=["q_proj"], use_dora=True))
    problem = lean_unsupported(dora.get_base_model(), 8, ("default",))
    assert problem is not None and "variant" in problem
    ids, mask = left_pad([base.encode_prompt("abc")], base.tokenizer.pad_token_id)
    assert isinstance(open_decoder(dora, ids, mask, 2, 4), HFDecoder)
    team = lora_team()
    monkeypatch.setattr(decoding, "LEAN_DECODE", False)
    prompts = [[team[0].encode_prompt("ab")], [team[1].encode_prompt("xyz?")]]
    assert not can_sample_together(team, prompts, 2, SamplingParams())
    with pytest.raises(ValueError, match="lean decode"):
        open_decoder(team[0].network, *left_pad(prompts[0] + prompts[1], 0), 2, 4, adapter_blocks=(["plan", "tool"], [1, 1]))


def test_several_active_adapters_at_once_fall_back_to_the_hf_forward():
    team = lora_team()
    network = team[0].network
    network.base_model.set_adapter(["plan", "tool"])  # PEFT sums both deltas: not one row block's adapter
    assert network.active_adapters == ["plan", "tool"]
    ids, mask = left_pad([team[0].encode_prompt("ab")], team[0].tokenizer.pad_token_id)
    assert isinstance(open_decoder(network, ids, mask, 2, 4), HFDecoder)
