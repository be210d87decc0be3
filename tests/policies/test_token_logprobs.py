"""policies/token_logprobs.py: the chunked path gives log_softmax's log-probs, gradients and entropies."""

import pytest
import torch

import teamrl.policies.token_logprobs as module
from teamrl.policies.token_logprobs import token_logprobs


def reference(logits, tokens):
    logp_all = torch.log_softmax(logits, -1)
    return logp_all.gather(-1, tokens[..., None]).squeeze(-1), -(logp_all.exp() * logp_all).sum(-1)


@pytest.mark.parametrize("chunk_bytes", [1 << 20, 4 * 97 * 3])  # one chunk; 3 rows a chunk with a ragged last
def test_values_gradients_and_entropies_match_log_softmax(monkeypatch, chunk_bytes):
    monkeypatch.setattr(module, "CHUNK_BYTES", chunk_bytes)
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(4, 5, 97, generator=generator) * 4
    tokens = torch.randint(0, 97, (4, 5), generator=generator)
    weights = torch.randn(4, 5, generator=generator)
    x, y = base.clone().requires_grad_(), base.clone().requires_grad_()
    logp, entropy = token_logprobs(x, tokens, with_entropy=True, entropy_grad=False)
    want_logp, want_entropy = reference(y, tokens)
    torch.testing.assert_close(logp, want_logp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy, want_entropy.detach(), rtol=1e-5, atol=1e-5)
    assert not entropy.requires_grad
    (logp * weights).sum().backward()
    (want_logp * weights).sum().backward()
    torch.testing.assert_close(x.grad, y.grad, rtol=1e-5, atol=1e-6)


def test_an_entropy_in_the_loss_takes_the_differentiable_path():
    x = torch.randn(3, 11, requires_grad=True)
    tokens = torch.tensor([1, 5, 10])
    logp, entropy = token_logprobs(x, tokens, with_entropy=True, entropy_grad=True)
    assert entropy.requires_grad
    entropy.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_without_entropy_or_gradients():
    x = torch.randn(2, 3, 13)
    tokens = torch.randint(0, 13, (2, 3))
    with torch.no_grad():
        logp, entropy = token_logprobs(x, tokens)
    torch.testing.assert_close(logp, reference(x, tokens)[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(entropy, torch.zeros(2, 3))
