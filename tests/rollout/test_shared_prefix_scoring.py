"""The trainer's scoring with a prompt prefix computed once gives the whole prompts' log-probs and gradients."""

import pytest
import torch
from transformers import Qwen2Config

from teamrl.policies import prompt_prefix, scoring
from teamrl.policies.prompt_prefix import columns_are_positions_free
from teamrl.policies.scoring import shared_prefix_logprobs
from test_lean_decode import PROMPTS, SYSTEM
from test_kv_cache import context_sensitive_policy
from test_lora_rows import lora_team

RESPONSES = [[5, 9, 7], [8], [6, 6, 10, 11], [12, 5], [7, 7]]
PROMPT_OF = [0, 1, 2, 3, 0]  # prompt 0 has two responses


def score(policy, prompts, whole: bool, monkeypatch):
    """Log-probs [N, T], the response mask, and the gradient of their masked sum on every LoRA weight."""
    monkeypatch.setattr(prompt_prefix, "MIN_SHARED_PREFIX", 10 ** 9 if whole else 16)
    model = policy.model
    model.zero_grad()
    logp, mask, _ = shared_prefix_logprobs(model, prompts, RESPONSES, PROMPT_OF, policy.tokenizer.pad_token_id,
                                           temperature=0.7)
    (logp * mask).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logp.detach(), mask, grads


def test_prefix_once_gives_the_whole_prompts_logprobs_and_gradients(monkeypatch):
    policy = lora_team("llama", names=("plan",))[0]
    prompts = [policy.encode_prompt(SYSTEM + p) for p in PROMPTS]
    seen = []
    real = scoring.cached_forward_full
    monkeypatch.setattr(scoring, "cached_forward_full",
                        lambda model, cache, **kw: seen.append(tuple(kw["input_ids"].shape)) or real(model, cache, **kw))
    logp, mask, grads = score(policy, prompts, whole=False, monkeypatch=monkeypatch)
    shared = seen[:2]
    seen.clear()
    want_logp, want_mask, want_grads = score(policy, prompts, whole=True, monkeypatch=monkeypatch)
    longest = max(len(p) for p in prompts)
    assert shared[0][0] == 1 and shared[1] == (len(prompts), longest - shared[0][1])  # prefix once, then own tokens
    assert seen[0] == (len(prompts), longest)  # whole: every prompt's every token
    assert torch.equal(mask, want_mask)
    assert (logp - want_logp).abs().max() < 1e-5 and want_logp.abs().max() > 0.1
    assert set(grads) == set(want_grads) and grads
    for name, grad in want_grads.items():
        assert (grads[name] - grad).abs().max() <= 1e-4 * max(grad.abs().max(), 1e-3), name


def test_sliding_windows_keep_the_whole_prompts():
    assert columns_are_positions_free(lora_team("llama", names=("plan",))[0].model)
    windowed = torch.nn.Module()
    windowed.config = Qwen2Config(use_sliding_window=True, sliding_window=64)
    assert not columns_are_positions_free(windowed)
    windowed.config = Qwen2Config(use_sliding_window=False, sliding_window=64)
    assert columns_are_positions_free(windowed)
    layered = torch.nn.Module()
    layered.config = type("Config", (), {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 64})()
    assert not columns_are_positions_free(layered)
    # a window that spans every column there is hides nothing (HF's window: keys fewer than 64 columns back)
    assert columns_are_positions_free(layered, 64) and not columns_are_positions_free(layered, 65)
    windowed.config = Qwen2Config(use_sliding_window=True, sliding_window=64)
    assert columns_are_positions_free(windowed, 64) and not columns_are_positions_free(windowed, 65)
    assert not columns_are_positions_free(torch.nn.Linear(2, 2))  # no config: nothing says how it attends


@pytest.mark.parametrize("window", [96, 12])
def test_gemma3_scores_a_shared_prefix_once_where_its_window_spans_prompt_and_response(window, monkeypatch):
    """Gemma-3's sliding window: the prefix runs once when the window spans the prompts and the longest
    response (the log-probs and gradients are the whole prompts'), and the prompts run whole when it does not."""
    policy = context_sensitive_policy("gemma3")
    policy.model.config.sliding_window = window
    prompts = [policy.encode_prompt(SYSTEM + p) for p in PROMPTS]
    assert max(len(p) for p in prompts) + max(len(r) for r in RESPONSES) <= 96
    seen = []
    real = scoring.cached_forward_full
    monkeypatch.setattr(scoring, "cached_forward_full",
                        lambda model, cache, **kw: seen.append(tuple(kw["input_ids"].shape)) or real(model, cache, **kw))
    logp, mask, grads = score(policy, prompts, whole=False, monkeypatch=monkeypatch)
    first = seen[0]
    want_logp, want_mask, want_grads = score(policy, prompts, whole=True, monkeypatch=monkeypatch)
    assert first[0] == (1 if window == 96 else len(prompts))  # the prefix alone, or every prompt whole
    assert torch.equal(mask, want_mask)
    assert (logp - want_logp).abs().max() < 1e-4 and want_logp.abs().max() > 0.1
    assert set(grads) == set(want_grads) and grads
    for name, grad in want_grads.items():
        assert (grads[name] - grad).abs().max() <= 1e-4 * max(grad.abs().max(), 1e-3), name
