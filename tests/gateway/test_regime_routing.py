"""Per-agent routing (duplicated roles, each agent its own policy) and heterogeneous bases (two tokenizers,
two chat templates) through the gateway: every call is sampled, recorded and scored by its agent's policy."""

from __future__ import annotations

import random

import openai
import torch

from gateway_template import CHAT_TEMPLATE
from teamrl.gateway import ProgramSettings, ProgramWorkflow
from teamrl.policies.loading import Policy
from teamrl.policies.scoring import pack_responses, response_logprobs
from teamrl.policies.tiny_model import build_char_tokenizer
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights, run_episodes
from toy import tiny_policy

HERE = __file__
PARAMS = SamplingParams(temperature=1.0, max_new_tokens=5)
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def two_voters(instance, endpoint):
    """voter_0 and voter_1 (one role) each answer once; team reward = length of the two answers."""
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    texts = [client.chat.completions.create(model=name, messages=[
        {"role": "user", "content": f"vote on {instance['index']}"}]).choices[0].message.content
        for name in ("voter_0", "voter_1")]
    return float(sum(map(len, texts)))


def planner_solver(instance, endpoint):
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    plan = client.chat.completions.create(model="planner", messages=[
        {"role": "user", "content": f"task {instance['index']}"}]).choices[0].message.content
    answer = client.chat.completions.create(model="solver", messages=[
        {"role": "user", "content": f"plan {plan}"}]).choices[0].message.content
    return float(len(answer))


def play(settings: ProgramSettings, policies, mapping, k: int):
    wf = ProgramWorkflow(settings, max_turns=2)
    try:
        return run_episodes(wf, [0, 1], "train", policies, mapping, PARAMS, k, RewardWeights(),
                            torch.Generator().manual_seed(0), random.Random(0))
    finally:
        wf.close()


def assert_scored_by_own_policy(samples, policies):
    """The recorded tokens' log-probs are those the sample's own policy gives them (what its update scores)."""
    for s in samples:
        policy, g = policies[s.policy], s.generation
        batch = pack_responses([g.prompt_ids], [g.response_ids], policy.tokenizer.pad_token_id)
        with torch.no_grad():
            logp, _ = response_logprobs(policy.model, batch, temperature=g.temperature)
        assert torch.allclose(logp[0, : len(g.response_ids)], torch.tensor(g.logprobs), atol=1e-5), s.agent


def test_per_agent_gives_duplicated_agents_their_own_policies():
    policies = {"voter_0": tiny_policy(seed=1, name="voter_0", chat_template=CHAT_TEMPLATE),
                "voter_1": tiny_policy(seed=2, name="voter_1", chat_template=CHAT_TEMPLATE)}
    settings = ProgramSettings(entry=f"{HERE}:two_voters", agents=["voter_0", "voter_1"],
                               roles={"voter_0": "voter", "voter_1": "voter"})
    samples, _ = play(settings, policies, {"voter_0": "voter_0", "voter_1": "voter_1"}, k=2)
    assert {s.role for s in samples} == {"voter"}
    assert all(s.policy == s.agent for s in samples) and {s.agent for s in samples} == {"voter_0", "voter_1"}
    assert_scored_by_own_policy(samples, policies)


def test_heterogeneous_bases_each_apply_their_own_tokenizer_and_template():
    from policies.team_kit import bpe_tokenizer  # a BPE vocabulary trained offline on toy prompts

    planner = tiny_policy(seed=1, name="planner", chat_template=CHAT_TEMPLATE)  # characters, Llama
    tok = bpe_tokenizer(300, ["<|im_start|>", "<|im_end|>"], CHATML, byte_level=True)
    from transformers import Qwen2Config, Qwen2ForCausalLM
    config = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id, tie_word_embeddings=False)
    torch.manual_seed(2)
    solver = Policy("solver", Qwen2ForCausalLM(config).eval(), tok, use_chat_template=True)
    assert len(tok) != len(build_char_tokenizer())  # two vocabularies
    policies = {"planner": planner, "solver": solver}
    settings = ProgramSettings(entry=f"{HERE}:planner_solver", agents=["planner", "solver"])
    samples, _ = play(settings, policies, {"planner": "planner", "solver": "solver"}, k=2)
    for s in samples:
        text = policies[s.policy].tokenizer.decode(s.generation.prompt_ids)
        if s.agent == "solver":
            assert text.startswith("<|im_start|>user\nplan ")  # ChatML, in the solver's own vocabulary
        else:
            assert text.startswith("<user>task ")  # the planner's template over characters
    assert_scored_by_own_policy(samples, policies)
