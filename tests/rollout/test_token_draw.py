"""The engine's token draw: the inverse of each row's cumulative distribution at one uniform per row."""

import torch

from teamrl.rollout.token_draw import draw_from_logits, draw_tokens


def test_draws_follow_each_rows_distribution():
    probs = torch.tensor([[0.5, 0.0, 0.3, 0.2, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0], [0.1, 0.1, 0.1, 0.1, 0.6]])
    generator = torch.Generator().manual_seed(0)
    n = 40_000
    counts = torch.zeros_like(probs)
    for _ in range(20):
        drawn = draw_tokens(probs.repeat(n // 20, 1), generator).view(n // 20, 3)
        for row in range(3):
            counts[row] += torch.bincount(drawn[:, row], minlength=5)
    freq = counts / n
    assert counts[0, 1] == 0 and counts[0, 4] == 0 and counts[1, :4].sum() == 0  # zero mass: never drawn
    assert (freq - probs).abs().max() < 0.01  # 3 standard errors at p = 0.5 over 40k draws is 0.0075


def test_one_uniform_per_row_picks_the_first_index_past_it(monkeypatch):
    probs = torch.tensor([[0.0, 2.0, 0.0, 1.0, 1.0]])  # unnormalised: scaled by the row's total (4)
    for u, want in [(0.0, 1), (0.49, 1), (0.5, 3), (0.74, 3), (0.75, 4), (1 - 2**-53, 4)]:
        monkeypatch.setattr(torch, "rand", lambda *a, u=u, **kw: torch.full((1, 1), u, dtype=torch.float64))
        assert int(draw_tokens(probs, torch.Generator())) == want, u
    # a uniform that rounds up to the total still lands on the last token with mass, never past it
    monkeypatch.setattr(torch, "rand", lambda *a, **kw: torch.ones((1, 1), dtype=torch.float64))
    assert int(draw_tokens(torch.tensor([[0.3, 0.7, 0.0, 0.0]]), torch.Generator())) == 1


def test_a_rare_token_after_a_likely_one_keeps_its_interval(monkeypatch):
    """In one float32 running sum, 1 + 1e-8 is 1: a token of mass 1e-8 after a token of mass 1 would have an
    empty interval and never be drawn. Its own block's sum keeps it."""
    probs = torch.zeros(1, 1000)
    probs[0, 3], probs[0, 700] = 1.0, 1e-8
    total = 1.0 + float(torch.tensor(1e-8))
    for u, want in [((1.0 + 0.5e-8) / total, 700), (0.999 / total, 3)]:
        monkeypatch.setattr(torch, "rand", lambda *a, u=u, **kw: torch.full((1, 1), u, dtype=torch.float64))
        assert int(draw_tokens(probs, torch.Generator())) == want


def test_draw_from_logits_is_the_draw_of_the_softmax_with_its_log_prob():
    logits = torch.randn(64, 49_152 + 77, generator=torch.Generator().manual_seed(3)) * 3  # a ragged last block
    logits[:, 5] = float("-inf")  # masked: never drawn
    tokens, logp = draw_from_logits(logits, torch.Generator().manual_seed(7))
    reference = draw_tokens(torch.softmax(logits, -1), torch.Generator().manual_seed(7))
    assert torch.equal(tokens, reference)  # one uniform per row from the same stream, the same inverse CDF
    want = torch.log_softmax(logits, -1).gather(-1, tokens[:, None]).squeeze(-1)
    assert (logp - want).abs().max() < 1e-5
    assert not (tokens == 5).any()


def test_draw_from_logits_follows_the_softmax():
    logits = torch.tensor([[0.0, float("-inf"), 1.0, -1.0], [2.0, 2.0, 2.0, 2.0]])
    probs = torch.softmax(logits, -1)
    generator = torch.Generator().manual_seed(0)
    counts = torch.zeros_like(probs)
    for _ in range(20):
        drawn, _ = draw_from_logits(logits.repeat(2000, 1), generator)
        drawn = drawn.view(2000, 2)
        for row in range(2):
            counts[row] += torch.bincount(drawn[:, row], minlength=4)
    assert counts[0, 1] == 0
    assert (counts / 40_000 - probs).abs().max() < 0.01  # 3 standard errors at p = 0.5 over 40k draws is 0.0075
