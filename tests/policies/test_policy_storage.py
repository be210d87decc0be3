"""LoRA policies on disk (PEFT adapter folders), merged export, the adapter-free KL reference."""

import json

import pytest
import torch

from team_kit import CountTeam, save_tiny_model, team_config, train_steps
from teamrl.cli import main as cli_main
from teamrl.policies.loading import load_policy
from teamrl.policies.storage import load_policy_weights, save_policy
from teamrl.setup.team import build_policies, policies_from_checkpoint
from teamrl.training.update import make_optimizer
from teamrl.workflows.base import Agent

AGENTS = [Agent("a", "writer"), Agent("b", "critic")]
PROMPT = "a|xx|y>"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """writer: a LoRA adapter, critic: another adapter on the same base, both after two updates."""
    base = save_tiny_model(tmp_path_factory.mktemp("base") / "llama")
    config = team_config(f"policy.model={base}", "regime=per_role", "policy.lora={r: 4}")
    policies, mapping, _ = train_steps(config, CountTeam(AGENTS, {"a", "b"}), steps=2)
    return base, config, policies


def _logits(policy, text=PROMPT):
    ids = torch.tensor([policy.encode_prompt(text)])
    with torch.no_grad():
        return policy.model(input_ids=ids).logits


def test_adapter_folder_round_trip(trained, tmp_path):
    base, config, policies = trained
    folder = save_policy(policies["writer"], tmp_path / "writer")
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("adapter_")) == [
        "adapter_config.json", "adapter_model.safetensors"]
    assert not (folder / "model.safetensors").exists()  # the base is not copied
    assert json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"] == base
    fresh, _ = build_policies(config, CountTeam(AGENTS, set()))
    assert not torch.allclose(_logits(fresh["writer"]), _logits(policies["writer"]))
    load_policy_weights(fresh["writer"], folder)
    assert torch.allclose(_logits(fresh["writer"]), _logits(policies["writer"]), atol=1e-6)
    # only the writer's adapter was loaded: the critic of the fresh team is still untrained
    assert torch.allclose(_logits(fresh["critic"]), _logits(load_policy("base", base)), atol=1e-6)
    with pytest.raises(ValueError, match="is a full model but .* holds a LoRA adapter"):
        load_policy_weights(load_policy("full", base), folder)


def test_full_policy_round_trip(trained, tmp_path):
    base = trained[0]
    policy = load_policy("full", base)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.01)
    save_policy(policy, tmp_path / "full")
    other = load_policy("other", base)
    load_policy_weights(other, tmp_path / "full")
    assert torch.allclose(_logits(other), _logits(policy), atol=1e-6)


def test_kl_reference_of_a_lora_policy_is_the_base_without_a_copy(trained):
    base, config, policies = trained
    opt = make_optimizer(policies["writer"], config.policy_config("writer"), config.train, with_reference=True)
    plain = load_policy("base", base)
    ids = torch.tensor([plain.encode_prompt(PROMPT)])
    with torch.no_grad():
        reference = opt.reference(input_ids=ids).logits
    assert torch.allclose(reference, plain.model(input_ids=ids).logits, atol=1e-5)
    assert not torch.allclose(reference, _logits(policies["writer"]))  # the adapter is back on afterwards
    assert next(opt.reference.parameters()) is next(policies["writer"].network.parameters())
    # the optimizer holds exactly the writer's adapter tensors
    held = {id(p) for g in opt.optimizer.param_groups for p in g["params"]}
    names = {n for n, p in policies["writer"].network.named_parameters() if id(p) in held}
    assert names and all(".lora_" in n and ".writer." in n for n in names)


def test_export_merged_and_eval_from_checkpoint(trained, tmp_path, capsys):
    base, config, policies = trained
    checkpoint = tmp_path / "checkpoints" / "final"
    for name, policy in policies.items():
        save_policy(policy, checkpoint / name)
    assert cli_main(["export", str(checkpoint), "--merged", str(tmp_path / "merged")]) == 0
    for name in ("writer", "critic"):
        merged = load_policy(name, str(tmp_path / "merged" / name))  # a plain HF model
        assert merged.adapter is None and not hasattr(merged.model, "peft_config")
        assert torch.allclose(_logits(merged), _logits(policies[name]), atol=1e-5)
    loaded, mapping = policies_from_checkpoint(config, CountTeam(AGENTS, set()), checkpoint)
    assert mapping == {"a": "writer", "b": "critic"}
    assert torch.allclose(_logits(loaded["critic"]), _logits(policies["critic"]), atol=1e-6)
    assert cli_main(["export", str(tmp_path / "nothing"), "--merged", str(tmp_path / "x")]) == 2
    assert "is not a folder" in capsys.readouterr().err
