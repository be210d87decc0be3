"""A team of different base models: Llama, Qwen2 and Phi-3 architectures with their own vocabularies."""

import pytest
import torch

from team_kit import CHATML, PHI3, CountTeam, bpe_tokenizer, owned, save_tiny_model, team_config, train_steps
from teamrl.workflows.base import Agent

AGENTS = [Agent("a", "writer"), Agent("b", "critic"), Agent("c", "judge")]


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    root = tmp_path_factory.mktemp("hetero")
    return {
        "llama": save_tiny_model(root / "llama", "llama"),  # characters, no chat template
        "qwen2": save_tiny_model(root / "qwen2", "qwen2",
                                 bpe_tokenizer(300, ["<|im_start|>", "<|im_end|>"], CHATML, byte_level=True)),
        "phi3": save_tiny_model(root / "phi3", "phi3",
                                bpe_tokenizer(130, ["<|user|>", "<|assistant|>", "<|end|>"], PHI3)),
    }


def _config(bases, *extra):
    return team_config(
        f"policies={{writer: {{model: {bases['llama']}}}, critic: {{model: {bases['qwen2']}, lora: {{r: 4}}}}, "
        f"judge: {{model: {bases['phi3']}}}}}", "roles={writer: writer, critic: critic, judge: judge}", *extra)


def test_each_policy_tokenizes_its_own_prompts_and_trains_only_on_them(bases):
    team = CountTeam(AGENTS, rewarded={"a", "b", "c"})
    policies, mapping, [step] = train_steps(_config(bases), team)
    writer, critic, judge = policies["writer"], policies["critic"], policies["judge"]
    assert {type(p.network.get_base_model() if p.adapter else p.network).__name__ for p in policies.values()} == {
        "LlamaForCausalLM", "Qwen2ForCausalLM", "Phi3ForCausalLM"}
    sizes = [len(p.tokenizer) for p in (writer, critic, judge)]
    assert len(set(sizes)) == 3, sizes
    assert (writer.use_chat_template, critic.use_chat_template, judge.use_chat_template) == (False, True, True)
    # the same text becomes different token ids under each policy
    text = "b|xx>"
    assert len({tuple(p.encode_prompt(text)) for p in policies.values()}) == 3
    assert critic.tokenizer.decode(critic.encode_prompt(text)).startswith("<|im_start|>user\nb|xx>")
    for s in step.samples:
        policy = policies[mapping[s.agent]]
        assert s.policy == mapping[s.agent]
        assert s.generation.prompt_ids in [policy.encode_prompt(p) for p in team.prompts[s.agent]]
        assert max(s.generation.response_ids) < len(policy.tokenizer)
    for name, policy in policies.items():
        assert {s.agent for s in step.trained[name]} == {a for a, p in mapping.items() if p == name}
        assert step.changes[name] and step.changes[name] <= owned(policy)
    assert step.changes["critic"] == owned(critic)  # the LoRA critic: its adapter only


def test_a_policy_without_signal_keeps_its_model(bases):
    team = CountTeam(AGENTS, rewarded={"a", "b"})  # the Phi-3 judge's reward is constant
    policies, _, [step] = train_steps(_config(bases), team)
    before = {n: p.clone() for n, p in policies["judge"].network.named_parameters()}
    assert not step.trained["judge"] and step.changes["judge"] == set()
    assert step.changes["writer"] and step.changes["critic"]
    assert all(torch.equal(before[n], p) for n, p in policies["judge"].network.named_parameters())
