"""Helpers of the policy-regime tests: tiny saved models with their own vocabularies, toy teams, a
training step that records which parameters each policy's update changed."""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (LlamaConfig, LlamaForCausalLM, Phi3Config, Phi3ForCausalLM, PreTrainedTokenizerFast,
                          Qwen2Config, Qwen2ForCausalLM)

from teamrl.config import AlgorithmConfig, RunConfig, load_config
from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights, Sample, run_episodes
from teamrl.setup.team import build_policies
from teamrl.training.credit import assign_advantages, trainable
from teamrl.training.update import make_optimizer, update_policy
from teamrl.workflows.base import Agent, Outcome, Workflow

ARCHITECTURES = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM),
                 "phi3": (Phi3Config, Phi3ForCausalLM)}
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
PHI3 = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
CORPUS = [f"{a}|{b}{c}>" for a in ("a", "b", "c", "voter_0", "voter_1", "voter_2", "judge")
          for b in ("", "xx", "xyx", "ab") for c in ("", "|x", "|yy")]


def bpe_tokenizer(vocab_size: int, specials: list[str], template: str | None,
                  byte_level: bool = False) -> PreTrainedTokenizerFast:
    """A BPE tokenizer trained offline on the toy prompts: its merges (and ids) differ by vocab_size.

    byte_level: over bytes, as Qwen2's (transformers rebuilds a qwen2 tokenizer as byte-level BPE
    from vocab and merges, so a character-level one would lose its newlines there).
    """
    core = Tokenizer(models.BPE(unk_token=None if byte_level else "<unk>"))
    if byte_level:
        core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        core.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        core.decoder = decoders.Fuse()
        alphabet = list(string.printable[:95] + "\n")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<eos>", "<unk>", *specials],
                                  initial_alphabet=alphabet, show_progress=False)
    core.train_from_iterator(CORPUS * 4, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    if template:
        tok.chat_template = template
    return tok


def save_tiny_model(folder: Path, arch: str = "llama", tokenizer: PreTrainedTokenizerFast | None = None,
                    hidden: int = 32, layers: int = 2, seed: int = 0) -> str:
    """A randomly initialised model of `arch` over `tokenizer` (default: characters), saved to `folder`."""
    tok = tokenizer or build_char_tokenizer()
    config_cls, model_cls = ARCHITECTURES[arch]
    config = config_cls(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                        max_position_embeddings=256, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                        bos_token_id=None, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model_cls(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@dataclass
class TeamState:
    history: list[str] = field(default_factory=list)


class CountTeam(Workflow):
    """Agents speak in order, each seeing the history. An agent in `rewarded` earns the count of 'x'
    in its text plus a local reward that differs between almost any two texts (0.1 per character plus
    its first character's code / 1000), so its groups always carry signal whatever the sampler drew;
    every other agent earns a constant, so its groups carry no signal and are left out of the update."""

    def __init__(self, agents: list[Agent], rewarded: set[str], max_turns: int = 1) -> None:
        self.agents, self.rewarded, self.max_turns = agents, rewarded, max_turns
        self.parallel = False
        self.prompts: dict[str, list[str]] = {a.name: [] for a in agents}

    def new_state(self, split: str, index: int) -> TeamState:
        return TeamState()

    def render(self, agent: str, state: TeamState) -> str:
        prompt = f"{agent}|" + "|".join(state.history) + ">"
        self.prompts[agent].append(prompt)
        return prompt

    def apply(self, agent: str, state: TeamState, response: str) -> Outcome:
        state.history.append(response)
        if agent not in self.rewarded:
            return Outcome(team=0.0, local=0.0)
        first = ord(response[0]) / 1000 if response else 0.0
        return Outcome(team=float(response.count("x")), local=0.1 * len(response) + first)

    def is_done(self, state: TeamState) -> bool:
        return False

    def success(self, state: TeamState) -> bool:
        return any("x" in text for text in state.history)


def team_config(*overrides: str) -> RunConfig:
    return load_config(None, ["policy.lr=1e-2", "train.warmup_steps=1", *overrides])


def snapshot(policies: dict[str, Policy]) -> dict[tuple[int, str], torch.Tensor]:
    """Every parameter of every distinct network, keyed by (network id, parameter name)."""
    networks = {id(p.network): p.network for p in policies.values()}
    return {(key, name): param.detach().clone() for key, net in networks.items()
            for name, param in net.named_parameters()}


def changed(before: dict, policies: dict[str, Policy]) -> set[tuple[int, str]]:
    now = snapshot(policies)
    return {key for key, value in before.items() if not torch.equal(value, now[key])}


def owned(policy: Policy) -> set[tuple[int, str]]:
    """What a policy may change: its adapter's tensors, or its whole (full) model."""
    names = [n for n, _ in policy.network.named_parameters()]
    if policy.adapter is None:
        return {(id(policy.network), n) for n in names}
    return {(id(policy.network), n) for n in names if f".{policy.adapter}." in n and ".lora_" in n}


@dataclass
class StepResult:
    samples: list[Sample]
    trained: dict[str, list[Sample]]  # policy -> its non-zero-advantage samples
    changes: dict[str, set[tuple[int, str]]]  # policy -> parameters its own update changed


def train_steps(config: RunConfig, workflow: CountTeam, steps: int = 1, k: int = 4, instances: int = 2,
                seed: int = 0, policies=None):
    """The loop's step (rollout -> advantages -> one update per policy) with a parameter snapshot
    around each policy's update. Returns (policies, mapping, [StepResult per step])."""
    torch.manual_seed(seed)
    if policies is None:
        policies, mapping = build_policies(config, workflow)
    else:
        policies, mapping = policies
    optimizers = {n: make_optimizer(p, config.policy_config(n), config.train, False) for n, p in policies.items()}
    algo = AlgorithmConfig(k=k, minibatch_size=64)
    gen, rng = torch.Generator().manual_seed(seed), random.Random(seed)
    results = []
    for _ in range(steps):
        samples, episodes = run_episodes(workflow, list(range(instances)), "train", policies, mapping,
                                         SamplingParams(temperature=1.0, max_new_tokens=4), k,
                                         RewardWeights(), gen, rng)
        assign_advantages(samples, episodes, algo)
        trained, changes = {}, {}
        for name, opt in optimizers.items():
            mine = trainable([s for s in samples if s.policy == name], True)
            trained[name] = mine
            before = snapshot(policies)
            if mine:
                update_policy(opt, mine, algo, 1.0, 1.0, rng)
            changes[name] = changed(before, policies)
        results.append(StepResult(samples, trained, changes))
    return policies, mapping, results
