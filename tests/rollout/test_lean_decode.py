"""The lean decoder gives the HF forward's logits and samples; other models fall back to the HF forward."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from teamrl.policies.loading import Policy
from teamrl.policies.scoring import left_pad
from teamrl.policies.tiny_model import build_char_tokenizer
from teamrl.rollout import decoding
from teamrl.rollout.decoding import HFDecoder, open_decoder
from teamrl.rollout.builtin_engine import SamplingParams, sample
from teamrl.rollout.lean_decode import MIN_SHARED_PREFIX, LeanDecoder, lean_unsupported, prefill, shared_prefix
from test_kv_cache import context_sensitive_policy
from toy import tiny_policy

PROMPTS = ["tool\n#..S\n..G.\n>", "ab", "plan\nstart=(0,1) goal=(2,3)\n>", "xyz?"]
SYSTEM = "system: plan a path, then stop.\n"
"""A prefix every prompt shares (over `lean_decode.MIN_SHARED_PREFIX` tokens): prefilled once."""


def hf_next_logits(model, sequences: list[list[int]], pad_id: int) -> torch.Tensor:
    """Reference: the HF forward without a cache over each whole (left-padded) sequence: [N, V]."""
    ids, mask = left_pad(sequences, pad_id)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -1].float()


@pytest.mark.parametrize("system, repeated", [("", 0), (SYSTEM, 0), (SYSTEM, 2)])
@pytest.mark.parametrize("arch", ["llama", "qwen2", "phi3"])
def test_lean_logits_equal_the_hf_forward(arch, system, repeated):
    """Left padding, K = 3 repeats, GQA (qwen2, phi3: 4 heads over 2), and rows (and a whole prompt) leaving;
    with a shared system prefix, prefilled once (the prompts' own tokens after it, padding between); with
    `repeated` prompts appearing again (prefilled once, their results repeated)."""
    policy = context_sensitive_policy(arch)
    model, pad = policy.model, policy.tokenizer.pad_token_id
    prompts = [policy.encode_prompt(system + p) for p in PROMPTS + PROMPTS[2:2 + repeated]]
    k, steps = 3, 7
    ids, mask = left_pad(prompts, pad)
    assert (shared_prefix(ids, mask) >= MIN_SHARED_PREFIX) == bool(system)
    assert lean_unsupported(model, mask.shape[1] + steps) is None
    with torch.no_grad():
        decoder = open_decoder(model, ids, mask, k, steps)
        assert isinstance(decoder, LeanDecoder)
        assert (decoder.prefill_logits - hf_next_logits(model, prompts, pad)).abs().max() < 1e-5
        rows = [prompts[i // k] for i in range(len(prompts) * k)]  # each row's sequence so far
        gen = torch.Generator().manual_seed(0)
        worst = 0.0
        for step in range(steps):
            if step == 3:  # rows 1, 2 of prompt 0 and every row of prompt 1 leave: slot layout, a prompt dropped
                keep = [r for r in range(len(rows)) if r not in (1, 2, 3, 4, 5)]
                decoder.keep(torch.tensor(keep))
                rows = [rows[r] for r in keep]
            if step == 5:  # and one more row: the prompt grid is no longer dense
                decoder.keep(torch.tensor([r for r in range(len(rows)) if r != 2]))
                rows = [rows[r] for r in range(len(rows)) if r != 2]
            fed = torch.randint(3, len(policy.tokenizer), (len(rows),), generator=gen)
            rows = [seq + [int(t)] for seq, t in zip(rows, fed)]
            got = decoder.step(fed)
            want = hf_next_logits(model, rows, pad)
            worst = max(worst, float((got - want).abs().max() / want.abs().max()))
    assert worst < 1e-5, worst  # relative to the largest logit (fp32 rounding grows with the prompt's length)
    assert want.abs().max() > 1.0  # the logits are far from flat: an error would show


@pytest.mark.parametrize("window", [96, 12])
def test_gemma3_runs_a_shared_prefix_once_where_its_window_spans_every_column(window):
    """Gemma-3 decodes on the HF forward (its sliding-window layers). Where the window spans the prompts and
    the response, the prompts' shared prefix runs once and the logits are the whole prompts'; where it does
    not, the prompts run whole, since padding inside a window would hide keys the whole prompt shows."""
    policy = context_sensitive_policy("gemma3")
    model, pad = policy.model, policy.tokenizer.pad_token_id
    model.config.sliding_window = window
    prompts = [policy.encode_prompt(SYSTEM + p) for p in PROMPTS]
    k, steps = 2, 6
    ids, mask = left_pad(prompts, pad)
    longest, common = max(len(p) for p in prompts), shared_prefix(ids, mask)
    assert common >= MIN_SHARED_PREFIX and longest + steps <= 96 and longest > 12
    seen = []
    network = model.model
    real_forward = network.forward
    network.forward = lambda **kw: seen.append(tuple(kw["input_ids"].shape)) or real_forward(**kw)
    with torch.no_grad():
        decoder = open_decoder(model, ids, mask, k, steps)
        assert isinstance(decoder, HFDecoder)
        once = [(1, common), (len(prompts), longest - common)]
        assert seen == (once if window == 96 else [(len(prompts), longest)])
        assert (decoder.prefill_logits - hf_next_logits(model, prompts, pad)).abs().max() < 1e-4
        rows = [prompts[i // k] for i in range(len(prompts) * k)]
        gen = torch.Generator().manual_seed(0)
        worst = 0.0
        for step in range(steps):
            if step == 2:  # prompt 1's rows and one of prompt 0's leave
                keep = [r for r in range(len(rows)) if r not in (1, 2, 3)]
                decoder.keep(torch.tensor(keep))
                rows = [rows[r] for r in keep]
            fed = torch.randint(3, len(policy.tokenizer), (len(rows),), generator=gen)
            rows = [seq + [int(t)] for seq, t in zip(rows, fed)]
            want = hf_next_logits(model, rows, pad)
            worst = max(worst, float((decoder.step(fed) - want).abs().max() / want.abs().max()))
    assert worst < 1e-5, worst
    assert want.abs().max() > 1.0  # the logits are far from flat: an error would show


@pytest.mark.parametrize("arch", ["llama", "qwen2", "phi3"])
def test_lean_and_hf_forward_sample_the_same(arch, monkeypatch):
    policy = context_sensitive_policy(arch)
    prompts = [policy.encode_prompt(p) for p in PROMPTS]
    params = SamplingParams(temperature=1.0, max_new_tokens=14, stop_strings=("a", "e"))
    runs = []
    for lean in (True, False):
        monkeypatch.setattr(decoding, "LEAN_DECODE", lean)
        runs.append(sample(policy, prompts, 4, params, torch.Generator().manual_seed(5)))
    for lean_group, hf_group in zip(*runs, strict=True):
        for got, want in zip(lean_group, hf_group, strict=True):
            assert (got.response_ids, got.text, got.finished) == (want.response_ids, want.text, want.finished)
            assert got.logprobs == pytest.approx(want.logprobs, abs=1e-5)
    lengths = {len(g.response_ids) for group in runs[0] for g in group}
    assert len(lengths) > 2  # rows finished at different steps


def test_hooks_other_architectures_and_sliding_windows_fall_back_to_the_hf_forward():
    policy = tiny_policy("llama")
    model = policy.model
    ids, mask = left_pad([policy.encode_prompt("abc")], policy.tokenizer.pad_token_id)
    handle = model.model.layers[0].mlp.register_forward_hook(lambda *args: None)
    assert "hooks" in lean_unsupported(model, 8)
    assert isinstance(open_decoder(model, ids, mask, 2, 4), HFDecoder)
    handle.remove()
    assert isinstance(open_decoder(model, ids, mask, 2, 4), LeanDecoder)
    assert isinstance(open_decoder(model, ids, mask, 2, 4, lean=False), HFDecoder)

    phi3 = tiny_policy("phi3").model
    phi3.config.sliding_window = 6
    assert "sliding window" in lean_unsupported(phi3, 8)
    assert lean_unsupported(phi3, 6) is None

    tok = build_char_tokenizer()
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=64)).eval()
    assert "architecture GPT2LMHeadModel" in lean_unsupported(gpt2, 8)
    other = Policy("g", gpt2, tok, False)
    gens = sample(other, [other.encode_prompt("hello")], 3, SamplingParams(max_new_tokens=5),
                  torch.Generator().manual_seed(0))
    assert all(1 <= len(g.response_ids) == len(g.logprobs) <= 5 for g in gens[0])


def test_a_lora_adapter_is_decoded_on_its_base_not_skipped():
    peft = pytest.importorskip("peft")
    policy = tiny_policy("llama")
    wrapped = peft.get_peft_model(policy.model, peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    # the PEFT wrapper is not a Llama class; its base, with LoRA layers in place of Linears, is decoded
    # with the active adapter's deltas (tests/rollout/test_lora_rows.py checks the logits)
    assert "architecture" in lean_unsupported(wrapped, 8)
    assert lean_unsupported(wrapped.get_base_model(), 8, ("default",)) is None
    ids, mask = left_pad([policy.encode_prompt("abc")], policy.tokenizer.pad_token_id)
    decoder = open_decoder(wrapped, ids, mask, 2, 4)
    assert isinstance(decoder, LeanDecoder) and decoder.rows.names == ("default",)


def test_the_hf_forward_prefill_projects_only_the_last_position_onto_the_vocabulary():
    """A prefill of P positions must not make [B, P, V] logits (Gemma-3's 262k vocabulary: 15 GB for 96 rows of
    150-token prompts); the next-token logits stay those of the whole forward."""
    policy = context_sensitive_policy("llama")
    model, pad = policy.model, policy.tokenizer.pad_token_id
    prompts = [policy.encode_prompt(p) for p in PROMPTS]
    ids, mask = left_pad(prompts, pad)
    seen = []
    handle = model.lm_head.register_forward_hook(lambda module, args, out: seen.append(tuple(args[0].shape)))
    with torch.no_grad():
        decoder = open_decoder(model, ids, mask, 2, 3, lean=False)
    handle.remove()
    assert isinstance(decoder, HFDecoder)
    assert seen == [(len(prompts), 1, model.config.hidden_size)]
    assert (decoder.prefill_logits - hf_next_logits(model, prompts, pad)).abs().max() < 1e-5


def test_shared_prefix_counts_the_leading_tokens_every_prompt_has():
    ids = torch.tensor([[0, 0, 5, 6, 7, 8], [5, 6, 7, 9, 9, 9], [0, 5, 6, 7, 8, 1]])
    mask = (ids != 0).long()
    assert shared_prefix(ids, mask) == 3  # 5 6 7
    assert shared_prefix(ids[:1], mask[:1]) == 0  # one prompt: nothing to share
    assert shared_prefix(ids[[0, 0]], mask[[0, 0]]) == 3  # the same prompt twice: all but its last token
    assert shared_prefix(ids, torch.ones_like(mask).index_fill(1, torch.tensor([3]), 0)) == 0  # not left padding


def test_a_shared_prefix_is_run_once_and_each_prompt_after_it():
    policy = context_sensitive_policy("llama")
    prompts = [policy.encode_prompt(SYSTEM + p) for p in PROMPTS]
    ids, mask = left_pad(prompts, policy.tokenizer.pad_token_id)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    seen = []
    network = policy.model.model
    real_forward = network.forward
    network.forward = lambda **kw: seen.append(tuple(kw["input_ids"].shape)) or real_forward(**kw)
    with torch.no_grad():
        part = prefill(network, ids, mask, positions)
    common, longest = shared_prefix(ids, mask), max(len(p) for p in prompts)
    assert seen == [(1, common), (len(prompts), longest - common)]  # the prefix once, then each prompt's own tokens
    seen.clear()
    ids, mask = left_pad(prompts + [prompts[2], prompts[0]], policy.tokenizer.pad_token_id)
    with torch.no_grad():  # prompts 2 and 0 again: the four distinct prompts are computed, then repeated
        again = prefill(network, ids, mask, (mask.cumsum(-1) - 1).clamp(min=0))
    assert seen == [(1, common), (len(prompts), longest - common)]
    assert torch.equal(again.keys[0][[4, 5]], again.keys[0][[2, 0]])
    assert (again.keys[0][:4] - part.keys[0]).abs().max() < 1e-5
    assert part.mask.shape == (len(prompts), longest) and part.mask.sum(-1).tolist() == [len(p) for p in prompts]
    assert part.keys[0].shape[2] == longest
