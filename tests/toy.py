"""Small helpers shared by tests: tiny real-architecture models and a toy two-agent workflow."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import (
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    LlamaConfig,
    LlamaForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer
from teamrl.workflows.base import Agent, Outcome, Workflow

ARCHITECTURES = {
    "llama": (LlamaConfig, LlamaForCausalLM),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    "phi3": (Phi3Config, Phi3ForCausalLM),
    # Gemma-3's layout: a sliding-window layer, then a full one (the real model has 5 sliding per full)
    "gemma3": (Gemma3TextConfig, Gemma3ForCausalLM),
}
ARCHITECTURE_OPTIONS = {"gemma3": {"head_dim": 8, "sliding_window": 64, "layer_types": ["sliding_attention", "full_attention"]}}


def tiny_policy(arch: str = "llama", seed: int = 0, name: str = "p", chat_template: str | None = None) -> Policy:
    """A randomly initialised 2-layer model of a real architecture over the char tokenizer."""
    tok = build_char_tokenizer()
    if chat_template:
        tok.chat_template = chat_template
    config_cls, model_cls = ARCHITECTURES[arch]
    config = config_cls(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
                        tie_word_embeddings=False, **ARCHITECTURE_OPTIONS.get(arch, {}))
    torch.manual_seed(seed)
    return Policy(name, model_cls(config).eval(), tok, use_chat_template=bool(chat_template))


@dataclass
class ToyState:
    history: list[tuple[int, str, str]] = field(default_factory=list)  # (turn, agent, text) applied
    turn: int = 0


class ToyWorkflow(Workflow):
    """Agents a then b; each sees everything committed so far. Reward: count of 'x' in the text."""

    def __init__(self, parallel: bool = False, max_turns: int = 2) -> None:
        self.agents = [Agent("a", "writer"), Agent("b", "critic")]
        self.parallel = parallel
        self.max_turns = max_turns
        self.prompts: list[tuple[str, str]] = []  # (agent, prompt) in render order

    def new_state(self, split: str, index: int) -> ToyState:
        return ToyState()

    def render(self, agent: str, state: ToyState) -> str:
        prompt = f"{agent}|" + "|".join(text for _, _, text in state.history) + ">"
        self.prompts.append((agent, prompt))
        return prompt

    def apply(self, agent: str, state: ToyState, response: str) -> Outcome:
        state.history.append((len(state.history) // 2, agent, response))
        # the first character's code makes two samples' rewards differ almost surely, so groups carry signal
        # whatever the sampler drew (the count of 'x' and the length alone are often equal at a few tokens)
        first = ord(response[0]) / 1000 if response else 0.0
        return Outcome(team=float(response.count("x")), local=0.1 * len(response) + first)

    def is_done(self, state: ToyState) -> bool:
        return False

    def success(self, state: ToyState) -> bool:
        return any("x" in text for _, _, text in state.history)
