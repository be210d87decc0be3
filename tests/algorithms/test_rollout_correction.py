import math
from typing import get_args

import pytest
import torch

from teamrl.algorithms.losses import ppo_clip_loss
from teamrl.algorithms.rollout_correction import CORRECTIONS, decoupled_ppo_loss, rollout_correction_weights
from teamrl.config import AlgorithmConfig, ConfigError
from teamrl.config.options import RolloutCorrection

ROLLOUT_CORRECTIONS = get_args(RolloutCorrection)

# Two responses, cap C = 2 (`_two_rows`). Row 0 has three tokens with pi_prox / mu = 3, 0.25, 1.5; row 1 one
# token with ratio 4, then padding whose log-probs are -inf / NaN (they must not reach the weights).
G = 1.125 ** (1 / 3)  # row 0's geometric mean ratio: (3 * 0.25 * 1.5) ** (1/3) = 1.0400...

# mode -> (weights of the 4 real tokens, in row order, is_weight_mean, is_weight_max, truncated_frac, masked_frac)
HAND = {
    # min(rho, 2): 3 -> 2 and 4 -> 2 are truncated
    "tis": ([2.0, 0.25, 1.5, 2.0], (2 + 0.25 + 1.5 + 2) / 4, 2.0, 2 / 4, 0.0),
    # rho outside [0.5, 2] -> 0: 3, 0.25 and 4 are dropped, 1.5 kept as it is
    "mis": ([0.0, 0.0, 1.5, 0.0], 1.5 / 4, 1.5, 0.0, 3 / 4),
    # every token of row 0 gets g = 1.04, row 1's single token min(4, 2) = 2
    "seq_tis": ([G, G, G, 2.0], (3 * G + 2) / 4, 2.0, 1 / 4, 0.0),
    # row 0 keeps g, row 1 (g = 4 > 2) is dropped
    "seq_mis": ([G, G, G, 0.0], 3 * G / 4, G, 0.0, 1 / 4),
}


def _two_rows() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    prox = torch.tensor([[math.log(3.0), math.log(0.25), math.log(1.5)], [math.log(4.0), -math.inf, 0.0]])
    mu = torch.tensor([[0.0, 0.0, 0.0], [0.0, math.nan, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    return prox, mu, mask


@pytest.mark.parametrize("mode", sorted(HAND))
def test_weights_and_metrics_match_hand_computation(mode):
    prox, mu, mask = _two_rows()
    weights, metrics = rollout_correction_weights(prox, mu, mask, mode, cap=2.0, staleness=1)
    expected, mean, high, truncated, masked = HAND[mode]
    assert weights[mask > 0].tolist() == pytest.approx(expected, rel=1e-6)
    assert weights[mask == 0].tolist() == [1.0, 1.0]  # padding: finite, and 0 in the loss anyway
    assert metrics == pytest.approx({"is_weight_mean": mean, "is_weight_max": high, "truncated_frac": truncated,
                                     "masked_frac": masked, "staleness": 1.0}, rel=1e-6)


def test_staleness_is_reported_only_when_given():
    prox, mu, mask = _two_rows()
    assert "staleness" not in rollout_correction_weights(prox, mu, mask, "tis")[1]


def _loop_weights(prox: torch.Tensor, mu: torch.Tensor, lengths: list[int], mode: str, cap: float
                  ) -> tuple[list[list[float]], int]:
    """Token by token in Python floats: the reference the vectorised functions must agree with.

    Returns each row's weights and how many tokens were truncated (tis modes) or dropped (mis modes).
    """
    out, changed = [], 0
    for row, n in enumerate(lengths):
        ratios = [math.exp(float(prox[row, t]) - float(mu[row, t])) for t in range(n)]
        if mode.startswith("seq_"):
            g = math.exp(sum(math.log(r) for r in ratios) / n) if n else 1.0
            ratios = [g] * n
        if mode.endswith("tis"):
            out.append([min(r, cap) for r in ratios])
            changed += sum(r > cap for r in ratios)
        else:
            out.append([r if 1 / cap <= r <= cap else 0.0 for r in ratios])
            changed += sum(not 1 / cap <= r <= cap for r in ratios)
    return out, changed


@pytest.mark.parametrize("mode", sorted(HAND))
def test_vectorised_weights_agree_with_a_token_loop(mode):
    gen = torch.Generator().manual_seed(0)
    lengths = [5, 1, 0, 7, 3]
    prox = -3.0 + torch.randn(5, 7, generator=gen)
    # Ratios spread over about [0.1, 10], rows shifted apart so that whole responses leave [1/2, 2] too.
    shift = torch.tensor([0.0, -1.2, 0.0, 1.2, 0.3])[:, None]
    mu = prox + 0.6 * torch.randn(5, 7, generator=gen) + shift
    mask = torch.zeros(5, 7)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1.0
    weights, metrics = rollout_correction_weights(prox, mu, mask, mode, cap=2.0)
    expected, changed = _loop_weights(prox, mu, lengths, mode, 2.0)
    for row, n in enumerate(lengths):
        assert weights[row, :n].tolist() == pytest.approx(expected[row], rel=1e-5)
    flat = [w for row in expected for w in row]
    assert metrics["is_weight_mean"] == pytest.approx(sum(flat) / len(flat), rel=1e-5)
    assert metrics["is_weight_max"] == pytest.approx(max(flat), rel=1e-5)
    assert 0 < changed < len(flat)  # the draw exercises the cap, and leaves some tokens inside it
    key = "truncated_frac" if mode.endswith("tis") else "masked_frac"
    assert metrics[key] == pytest.approx(changed / len(flat))


def test_decoupled_loss_matches_hand_computation():
    # One response of two tokens, A = +1, r = pi_theta / pi_prox = e^0.5 (clipped to 1.2) and e^-0.1,
    # behaviour weights 2 and 0.5.
    logp = torch.tensor([[0.5, -0.1]])
    loss, metrics = decoupled_ppo_loss(logp, torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2),
                                       torch.tensor([[2.0, 0.5]]), 0.2, 0.2, "token-mean")
    assert loss.item() == pytest.approx(-(2 * 1.2 + 0.5 * math.exp(-0.1)) / 2, rel=1e-6)
    assert metrics["clip_frac"] == pytest.approx(0.5)


def test_decoupled_gradient_is_the_ppo_gradient_times_the_weight():
    # Unclipped tokens: d loss / d logp_t = -w_t * r_t * A / N (token-mean over N = 2 real tokens).
    logp = torch.tensor([[0.1, -0.1, 5.0]], requires_grad=True)
    weights = torch.tensor([[2.0, 0.25, 7.0]])
    loss, _ = decoupled_ppo_loss(logp, torch.zeros(1, 3), torch.tensor([-1.0]), torch.tensor([[1.0, 1.0, 0.0]]),
                                 weights)
    loss.backward()
    assert logp.grad.tolist()[0] == pytest.approx([2 * math.exp(0.1) / 2, 0.25 * math.exp(-0.1) / 2, 0.0], rel=1e-6)


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"])
@pytest.mark.parametrize("mode", sorted(HAND))
def test_sampler_equal_to_trainer_gives_todays_loss_bit_for_bit(mode, aggregation):
    gen = torch.Generator().manual_seed(1)
    mu = -2.0 + torch.randn(4, 6, generator=gen)
    mask = (torch.arange(6)[None, :] < torch.tensor([6, 3, 1, 5])[:, None]).float()
    mu = torch.where(mask > 0, mu, torch.full_like(mu, -math.inf))  # padding as a scorer may leave it
    theta = (mu + 0.3 * torch.randn(4, 6, generator=gen)).detach()
    adv = torch.randn(4, generator=gen)
    weights, metrics = rollout_correction_weights(mu.clone(), mu, mask, mode, cap=2.0)
    assert metrics["is_weight_mean"] == 1.0 and metrics["is_weight_max"] == 1.0
    assert metrics["truncated_frac"] == 0.0 and metrics["masked_frac"] == 0.0

    a = theta.clone().requires_grad_(True)
    b = theta.clone().requires_grad_(True)
    ours, ours_metrics = decoupled_ppo_loss(a, mu.clone(), adv, mask, weights, 0.2, 0.28, aggregation)
    today, today_metrics = ppo_clip_loss(b, mu, adv, mask, 0.2, 0.28, aggregation)
    ours.backward()
    today.backward()
    assert torch.equal(ours, today) and torch.equal(a.grad, b.grad)
    assert ours_metrics == today_metrics
    # ...and a weight off 1 changes both, so the equality above is not vacuous.
    c = theta.clone().requires_grad_(True)
    moved, _ = decoupled_ppo_loss(c, mu, adv, mask, torch.where(mask > 0, weights * 1.5, weights), 0.2, 0.28,
                                  aggregation)
    moved.backward()
    assert not torch.equal(moved, today) and not torch.equal(c.grad, b.grad)


def test_extreme_log_ratios_give_finite_weights():
    prox = torch.tensor([[0.0, -500.0, 0.0]])
    mu = torch.tensor([[-500.0, 0.0, 0.0]])
    for mode in CORRECTIONS.names():
        weights, metrics = rollout_correction_weights(prox, mu, torch.ones(1, 3), mode, cap=2.0)
        assert torch.isfinite(weights).all() and math.isfinite(metrics["is_weight_mean"])


def test_unknown_mode_and_bad_cap_are_refused():
    prox, mu, mask = _two_rows()
    with pytest.raises(KeyError, match="seq_tis"):
        rollout_correction_weights(prox, mu, mask, "bogus")
    with pytest.raises(ValueError, match="cap must be > 1"):
        rollout_correction_weights(prox, mu, mask, "tis", cap=1.0)


def test_config_offers_none_and_every_registered_correction():
    assert sorted(ROLLOUT_CORRECTIONS) == sorted(["none", *CORRECTIONS.names()])
    assert AlgorithmConfig().rollout_correction == "none"
    with pytest.raises(ConfigError, match="rollout_correction = 'tls'.*none, tis, mis"):
        AlgorithmConfig(rollout_correction="tls")
    with pytest.raises(ConfigError, match="rollout_correction_cap = 0.5"):
        AlgorithmConfig(rollout_correction="tis", rollout_correction_cap=0.5)
