"""The role-by-role update: same gradient as one backward, and each mitigation changes it exactly as specified."""

from __future__ import annotations

import copy

import pytest
import torch

from teamrl.config import AlgorithmConfig
from teamrl.diagnostics.gradients import RoleGradients, damping_scale
from teamrl.policies.scoring import shared_prefix_logprobs
from teamrl.algorithms.losses import kl_k3, token_mean
from teamrl.training.update import _part_loss, _units, update_policy
from diag_helpers import flat_params, sgd_state, toy_samples

import random

ALGO = dict(k=4, minibatch_size=10_000, clip_low=0.2, clip_high=0.2)


def _step(policy, samples, algo, tracker=None, reference=None) -> torch.Tensor:
    """Parameter change of one SGD(lr=1) update without clipping: minus the gradient applied."""
    before = flat_params(policy)
    update_policy(sgd_state(policy, reference), samples, algo, 1.0, 0.0, random.Random(0), tracker)
    return flat_params(policy) - before


def _role_grad(policy, part, algo, weight, kl_coef=0.0, reference=None) -> torch.Tensor:
    """Gradient of weight * (one role's loss) alone, by a plain separate backward."""
    state = sgd_state(policy, reference)
    state.optimizer.zero_grad(set_to_none=True)
    loss, _ = _part_loss(state, part, algo, 1.0, policy.tokenizer.pad_token_id, weight, kl_coef)
    loss.backward()
    grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).clone()
                      for p in policy.model.parameters()])
    state.optimizer.zero_grad(set_to_none=True)
    return grad


@pytest.fixture(scope="module")
def toy():
    samples, policy = toy_samples()
    return samples, policy


def _by_role(samples):
    return {r: [s for s in samples if s.role == r] for r in ("writer", "critic")}


def test_role_parts_sum_to_the_one_backward_gradient(toy):
    samples, policy = toy
    algo = AlgorithmConfig(**ALGO)
    one = _step(copy.deepcopy(policy), samples, algo)
    model = copy.deepcopy(policy)
    tracker = RoleGradients([p for p in model.model.parameters()], full=True)
    split = _step(model, samples, algo, tracker)
    assert one.abs().max() > 1e-4  # the update did something
    torch.testing.assert_close(split, one, atol=1e-6, rtol=1e-4)


def test_tracker_reports_each_roles_exact_gradient_norm_and_share(toy):
    samples, policy = toy
    algo = AlgorithmConfig(**ALGO)
    total = _units(samples, algo.aggregation)
    roles = _by_role(samples)
    expected = {r: float(_role_grad(copy.deepcopy(policy), part, algo, _units(part, algo.aggregation) / total).norm())
                for r, part in roles.items()}
    model = copy.deepcopy(policy)
    tracker = RoleGradients(list(model.model.parameters()), full=True)
    _step(model, samples, algo, tracker)
    metrics = tracker.end_step()
    for role, norm in expected.items():
        assert metrics[f"diag/role/{role}/grad_norm"] == pytest.approx(norm, rel=1e-5)
        assert metrics[f"diag/role/{role}/grad_share"] == pytest.approx(norm / sum(expected.values()), rel=1e-5)
        tokens = _units(roles[role], algo.aggregation)
        assert metrics[f"diag/role/{role}/tokens_share"] == pytest.approx(tokens / total)
    # one agent per role: the role's agent gradient is the role gradient
    assert metrics["diag/agent/a/grad_norm"] == pytest.approx(expected["writer"], rel=1e-5)


def test_a_step_with_one_role_of_a_shared_policy_gives_it_the_whole_share(toy):
    # The critic's samples all dropped (say, zero advantage): the writer carried the policy's whole gradient.
    samples, policy = toy
    writer = _by_role(samples)["writer"]
    model = copy.deepcopy(policy)
    tracker = RoleGradients(list(model.model.parameters()), roles=("writer", "critic"))
    _step(model, writer, AlgorithmConfig(**ALGO), tracker)
    metrics = tracker.end_step()
    assert metrics["diag/role/writer/grad_share"] == 1.0 and metrics["diag/role/critic/grad_share"] == 0.0
    assert metrics["diag/role/critic/samples_share"] == 0.0 and "diag/role/critic/grad_norm" not in metrics
    # A policy serving one role has no shares, whatever its update saw.
    model = copy.deepcopy(policy)
    alone = RoleGradients(list(model.model.parameters()), roles=("writer",))
    _step(model, writer, AlgorithmConfig(**ALGO), alone)
    metrics = alone.end_step()
    assert "diag/role/writer/grad_norm" in metrics and not any(k.endswith("_share") for k in metrics)


def test_coherence_damping_scales_each_role_by_one_minus_lambda_clamped_cosine(toy):
    samples, policy = toy
    lam = 0.3
    algo = AlgorithmConfig(**ALGO, coherence_damping=lam)
    total = _units(samples, algo.aggregation)
    grads = {r: _role_grad(copy.deepcopy(policy), part, algo, _units(part, algo.aggregation) / total)
             for r, part in _by_role(samples).items()}
    model = copy.deepcopy(policy)
    tracker = RoleGradients(list(model.model.parameters()), damping=lam)
    # writer's EMA points along its own gradient (cos 1 -> scale 0.7); critic's against it (cos -1 -> 1.0)
    tracker.ema = {"writer": grads["writer"] * 3.0, "critic": -grads["critic"]}
    delta = _step(model, samples, algo, tracker)
    torch.testing.assert_close(delta, -((1 - lam) * grads["writer"] + grads["critic"]), atol=1e-6, rtol=1e-4)
    metrics = tracker.end_step()
    assert metrics["diag/role/writer/damping_scale"] == pytest.approx(0.7)
    assert metrics["diag/role/critic/damping_scale"] == pytest.approx(1.0)


def test_damping_scale_formula():
    assert damping_scale(0.5, 0.2) == pytest.approx(0.9)
    assert damping_scale(2.0, 0.2) == pytest.approx(0.8)  # cosine clamped to 1
    assert damping_scale(-0.4, 0.3) == 1.0


def test_role_balanced_weights_each_role_equally(toy):
    samples, policy = toy
    algo = AlgorithmConfig(**ALGO, role_balanced=True)
    # each role's own token-mean loss (weight 1), averaged over the two roles
    grads = [_role_grad(copy.deepcopy(policy), part, algo, 1.0) for part in _by_role(samples).values()]
    delta = _step(copy.deepcopy(policy), samples, algo)
    torch.testing.assert_close(delta, -(0.5 * grads[0] + 0.5 * grads[1]), atol=1e-6, rtol=1e-4)
    plain = _step(copy.deepcopy(policy), samples, AlgorithmConfig(**ALGO))
    assert (plain - delta).abs().max() > 1e-6  # unequal token counts: the weighting matters


def test_per_role_kl_anchor_adds_only_that_roles_kl_gradient(toy):
    samples, policy = toy
    reference = toy_samples(seed=1)[1].model.requires_grad_(False)  # a different model: KL > 0
    coef = 0.5
    anchored = AlgorithmConfig(**ALGO, kl_coef_by_role={"critic": coef})
    plain = AlgorithmConfig(**ALGO)
    critic = _by_role(samples)["critic"]
    weight = _units(critic, "token-mean") / _units(samples, "token-mean")
    # hand-built KL gradient of the critic part: weight * coef * token_mean(k3(logp, ref_logp))
    model = copy.deepcopy(policy)
    gens = [s.generation for s in critic]
    slots: dict = {}
    index = [slots.setdefault(tuple(g.prompt_ids), len(slots)) for g in gens]
    args = ([list(p) for p in slots], [g.response_ids for g in gens], index, model.tokenizer.pad_token_id, 1.0)
    logp, mask, _ = shared_prefix_logprobs(model.model, *args)
    with torch.no_grad():
        ref_logp, _, _ = shared_prefix_logprobs(reference, *args)
    (weight * coef * token_mean(kl_k3(logp, ref_logp), mask)).backward()
    kl_grad = torch.cat([p.grad.reshape(-1) for p in model.model.parameters()])
    with_anchor = _step(copy.deepcopy(policy), samples, anchored, reference=reference)
    without = _step(copy.deepcopy(policy), samples, plain, reference=reference)
    assert kl_grad.abs().max() > 1e-6
    torch.testing.assert_close(with_anchor - without, -kl_grad, atol=1e-6, rtol=1e-3)


def test_kl_anchor_without_a_reference_says_how_to_fix_it(toy):
    samples, policy = toy
    with pytest.raises(ValueError, match="no reference model"):
        _step(copy.deepcopy(policy), samples, AlgorithmConfig(**ALGO, kl_coef_by_role={"critic": 0.1}))


def test_agentwise_normalisation_divides_by_each_agents_own_reward_std():
    """Dr. GRPO advantages (no group std): agent a's rewards 0, 2 | 4, 6 have mean 3 and std sqrt(5),
    so its centred advantages -1, 1 become -1/sqrt(5), 1/sqrt(5); agent b (rewards 10 apart) gets +-5/sqrt(25)."""
    from teamrl.training.credit import assign_advantages
    from diag_helpers import sample

    def batch():
        return [sample("a", "writer", reward=r, episode=e) for e, r in ((0, 0.0), (0, 2.0), (1, 4.0), (1, 6.0))] + \
               [sample("b", "critic", reward=r, episode=e) for e, r in ((0, 0.0), (0, 10.0), (1, 0.0), (1, 10.0))]

    plain, normed = batch(), batch()
    assign_advantages(plain, [], AlgorithmConfig(scale_by_std=False, adv_eps=0.0))
    assign_advantages(normed, [], AlgorithmConfig(scale_by_std=False, adv_eps=0.0, agentwise_norm=True))
    assert [s.advantage for s in plain] == pytest.approx([-1, 1, -1, 1, -5, 5, -5, 5])
    a, b = 1 / 5 ** 0.5, 5 / 25 ** 0.5
    assert [s.advantage for s in normed] == pytest.approx([-a, a, -a, a, -b, b, -b, b])


def test_agentwise_normalisation_changes_tree_advantages_with_group_std_scaling():
    """With the default scale_by_std the per-group std used to undo the per-agent rescale (every tree group
    holds one agent): agent a's groups {0, 2} and {4, 4.2} gave +-1 in both. Scaled by a's own reward std
    over the batch (rewards 0, 2, 4, 4.2: mean 2.55, population std sqrt(11.63 / 4)) the small-spread group's
    advantages are ten times smaller than the other's."""
    from teamrl.training.credit import assign_advantages
    from diag_helpers import sample

    def batch():
        return [sample("a", "writer", reward=r, episode=e) for e, r in ((0, 0.0), (0, 2.0), (1, 4.0), (1, 4.2))]

    plain, normed = batch(), batch()
    assign_advantages(plain, [], AlgorithmConfig(adv_eps=0.0))
    assign_advantages(normed, [], AlgorithmConfig(adv_eps=0.0, agentwise_norm=True))
    assert [s.advantage for s in plain] == pytest.approx([-1, 1, -1, 1], rel=1e-5)
    std = (11.63 / 4) ** 0.5
    assert [s.advantage for s in normed] == pytest.approx([-1 / std, 1 / std, -0.1 / std, 0.1 / std], rel=1e-5)
