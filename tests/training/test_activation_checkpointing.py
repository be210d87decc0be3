"""policy.activation_checkpointing: MLPs recomputed in backward, gradients unchanged (full models and LoRA)."""

import copy
import dataclasses
import random

import pytest
import torch

from update_fixtures import policy_optimizer, synthetic_samples

from teamrl.config import AlgorithmConfig, ConfigError, LoraConfig, PolicyConfig
from teamrl.policies.assemble import load_policies
from teamrl.policies.loading import decoder_layers, enable_activation_checkpointing
from teamrl.policies.lora import attach_adapters
from teamrl.policies.scoring import shared_prefix_logprobs
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.training.update import update_policy

PROMPTS, RESPONSES, INDEX = [[5, 6, 7, 8, 9], [20, 21, 22]], [[10, 11, 12], [13, 14], [30, 31, 32, 33]], [0, 0, 1]


def _model(lora=False):
    tok = build_char_tokenizer()
    model = build_tiny_model(tok, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, seed=3)
    if lora:
        model = attach_adapters(model, {"planner": LoraConfig(r=4, target_modules=["q_proj", "gate_proj", "down_proj"])})
        with torch.no_grad():  # PEFT zero-initialises B; non-zero B gives A a gradient too
            for name, param in model.named_parameters():
                if "lora_B" in name:
                    param.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(name)))
    return model, tok


def _gradients(model, tok):
    """Gradients of a loss on the trainer's shared-prompt forward (log-probs and entropy), and the MLP call count."""
    # (gate_proj, the MLP's first op: torch stops a recompute early once the saved tensors are back)
    calls = []
    hooks = [layer.mlp.gate_proj.register_forward_hook(lambda *_: calls.append(1)) for layer in decoder_layers(model)]
    model.train()
    logp, mask, entropy = shared_prefix_logprobs(model, PROMPTS, RESPONSES, INDEX, tok.pad_token_id, 0.9,
                                                 with_entropy=True)
    ((logp * mask).sum() * 0.3 + (entropy * mask).mean()).backward()
    for hook in hooks:
        hook.remove()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return grads, logp.detach(), len(calls)


@pytest.mark.parametrize("lora", [False, True])
def test_recomputed_mlps_give_the_same_gradients(lora):
    plain_grads, plain_logp, plain_calls = _gradients(*_model(lora))
    model, tok = _model(lora)
    assert enable_activation_checkpointing(model) == 2
    assert enable_activation_checkpointing(model) == 2  # idempotent: a shared base may be asked twice
    grads, logp, calls = _gradients(model, tok)
    assert calls == 2 * plain_calls  # each MLP ran again in backward
    torch.testing.assert_close(logp, plain_logp, atol=0, rtol=0)  # the KV cache still links prompt and responses
    assert grads.keys() == plain_grads.keys() and grads
    if lora:
        assert all("lora_" in name for name in grads)
    for name, value in plain_grads.items():
        torch.testing.assert_close(grads[name], value, atol=1e-7, rtol=1e-5, msg=name)


def test_update_with_checkpointing_equals_update_without():
    algo = dataclasses.replace(AlgorithmConfig(), minibatch_size=7, kl_coef=0.1)
    results = []
    for recompute in (False, True):
        state = policy_optimizer()
        if recompute:
            enable_activation_checkpointing(state.policy.network)
        state.reference = copy.deepcopy(state.policy.model).eval().requires_grad_(False)
        metrics = update_policy(state, synthetic_samples(), algo, 1.0, 0.5, random.Random(11))
        results.append((metrics, {k: v.clone() for k, v in state.policy.model.state_dict().items()}))
    (metrics, weights), (metrics_ac, weights_ac) = results
    for key, value in metrics.items():
        if key != "peak_memory_mb":  # measured, not computed: recomputation exists to change it
            assert metrics_ac[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    for key, value in weights.items():
        torch.testing.assert_close(weights_ac[key], value, atol=1e-6, rtol=0, msg=key)


def test_a_deep_copy_of_a_checkpointed_model_uses_its_own_weights():
    """The KL reference is a deep copy: its recomputed MLPs must run its frozen weights, not the live ones."""
    model, tok = _model()
    enable_activation_checkpointing(model)
    reference = copy.deepcopy(model)
    ids = torch.tensor([PROMPTS[0]])
    before = reference(input_ids=ids).logits
    with torch.no_grad():
        for param in model.parameters():
            param.add_(1.0)
    torch.testing.assert_close(reference(input_ids=ids).logits, before)
    assert type(reference.model.layers[0].mlp) is type(model.model.layers[0].mlp)


def test_the_switch_is_a_policy_setting_shared_by_adapters_of_one_base(random_model_dir):
    settings = {"planner": PolicyConfig(model=str(random_model_dir), activation_checkpointing=True),
                "critic": PolicyConfig(model=str(random_model_dir))}
    policies = load_policies(settings)
    assert type(policies["planner"].network.model.layers[0].mlp).__name__.startswith("Recomputed")
    assert not type(policies["critic"].network.model.layers[0].mlp).__name__.startswith("Recomputed")
    lora = {name: PolicyConfig(model=str(random_model_dir), lora=LoraConfig(), activation_checkpointing=on)
            for name, on in (("planner", True), ("critic", False))}
    with pytest.raises(ConfigError, match="share its activation_checkpointing"):
        load_policies(lora)
