import math

import pytest
import torch

from teamrl.algorithms.losses import AGGREGATIONS, kl_k3, ppo_clip_loss


def test_ppo_loss_matches_hand_computation_with_clipping():
    # one sequence of two tokens, advantage +1; ratios e^0.5 (clipped to 1.2) and e^-0.1
    logp = torch.tensor([[0.5, -0.1]])
    old = torch.zeros(1, 2)
    mask = torch.ones(1, 2)
    loss, metrics = ppo_clip_loss(logp, old, torch.tensor([1.0]), mask, 0.2, 0.2, "token-mean")
    expected = -(min(math.exp(0.5), 1.2) + min(math.exp(-0.1), max(math.exp(-0.1), 0.8))) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert metrics["clip_frac"] == pytest.approx(0.5)


def test_negative_advantage_clips_below():
    logp = torch.tensor([[-0.5]])  # ratio 0.607 < 0.8: clipped term is larger for A < 0
    loss, _ = ppo_clip_loss(logp, torch.zeros(1, 1), torch.tensor([-2.0]), torch.ones(1, 1), 0.2, 0.28)
    assert loss.item() == pytest.approx(-(-2.0 * 0.8), rel=1e-6)


def test_ratio_one_gives_plain_policy_gradient():
    logp = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, _ = ppo_clip_loss(logp, logp.detach(), torch.tensor([1.0, -1.0]), mask)
    loss.backward()
    # token-mean over 3 real tokens: d/dlogp = -A / 3 on real tokens, 0 on padding
    assert logp.grad.flatten().tolist() == pytest.approx([-1 / 3, -1 / 3, 1 / 3, 0.0])


def test_aggregations():
    values = torch.tensor([[1.0, 3.0, 0.0], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert AGGREGATIONS.get("token-mean")(values, mask).item() == pytest.approx(2.0)
    assert AGGREGATIONS.get("seq-mean-token-mean")(values, mask).item() == pytest.approx(2.0)
    assert AGGREGATIONS.get("seq-mean-token-sum")(values, mask).item() == pytest.approx(3.0)
    values2 = torch.tensor([[1.0, 1.0, 1.0], [4.0, 0.0, 0.0]])
    mask2 = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert AGGREGATIONS.get("token-mean")(values2, mask2).item() == pytest.approx(7 / 4)
    assert AGGREGATIONS.get("seq-mean-token-mean")(values2, mask2).item() == pytest.approx(2.5)


def test_unknown_aggregation_lists_valid_names():
    with pytest.raises(KeyError, match="token-mean"):
        AGGREGATIONS.get("bogus")


def test_k3_is_zero_at_equality_and_positive_elsewhere():
    a = torch.tensor([-1.0, -2.0])
    assert kl_k3(a, a).tolist() == [0.0, 0.0]
    value = kl_k3(torch.tensor([-1.0]), torch.tensor([-2.0])).item()
    assert value == pytest.approx(math.exp(-1) + 1 - 1)
    assert value > 0


def test_extreme_ratios_give_a_finite_loss_and_gradient():
    """A log-ratio of 1000 overflows exp without the clamp (inf * 0 = NaN in the gradient)."""
    logp = torch.tensor([[1000.0, -1000.0, 0.0]], requires_grad=True)
    old = torch.zeros(1, 3)
    for adv in (1.0, -1.0, 0.0):
        logp.grad = None
        loss, metrics = ppo_clip_loss(logp, old, torch.tensor([adv]), torch.ones(1, 3), 0.2, 0.2)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
        assert all(math.isfinite(v) for v in metrics.values())
        assert metrics["ratio_max"] == pytest.approx(math.exp(20.0), rel=1e-5)


def test_log_ratio_clamp_is_the_setting():
    logp = torch.tensor([[3.0]])
    _, metrics = ppo_clip_loss(logp, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1), log_ratio_clamp=2.0)
    assert metrics["ratio_max"] == pytest.approx(math.exp(2.0), rel=1e-6)
    loss, _ = ppo_clip_loss(torch.tensor([[-3.0]]), torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1),
                            0.2, 0.2, log_ratio_clamp=2.0)
    # A < 0: min(ratio * A, clip(ratio) * A) = max(ratio, 0.8) * -1 with ratio = e^-2 -> 0.8; negated: 0.8
    assert loss.item() == pytest.approx(0.8, rel=1e-6)


def test_padding_with_infinite_logprobs_leaves_loss_metrics_and_gradient_finite():
    logp = torch.tensor([[-1.0, 0.0], [-0.5, 0.0]], requires_grad=True)
    old = torch.tensor([[-1.2, float("-inf")], [-0.4, float("nan")]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    loss, metrics = ppo_clip_loss(logp, old, torch.tensor([1.0, -1.0]), mask)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert logp.grad[:, 1].abs().sum() == 0
    assert all(math.isfinite(v) for v in metrics.values())
    # same loss as without the padding column
    ref, _ = ppo_clip_loss(logp[:, :1].detach(), old[:, :1], torch.tensor([1.0, -1.0]), mask[:, :1])
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)


def test_k3_is_clamped_and_finite_on_padding():
    logp = torch.tensor([[0.0, 0.0, 0.0]])
    ref = torch.tensor([[100.0, float("-inf"), float("nan")]])
    kl = kl_k3(logp, ref, clamp=10.0)
    assert torch.isfinite(kl).all()
    assert kl[0, 0].item() == pytest.approx(math.exp(10.0) - 10.0 - 1.0, rel=1e-6)
