"""Small models for the vLLM tests: real architectures vLLM's CPU build runs (head size 32)."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer

ARCHITECTURES = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}


def small_policy(arch: str = "llama", seed: int = 0, name: str = "p", tied: bool = True, sharpen: float = 4.0) -> Policy:
    """A random 2-layer model over the char tokenizer, head size 32 (the smallest vLLM's CPU attention runs).

    sharpen: scales the random matrices, so that samples differ in a test-visible way (1: the plain init).
    """
    tok = build_char_tokenizer()
    config_cls, model_cls = ARCHITECTURES[arch]
    config = config_cls(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
                        tie_word_embeddings=tied)
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.mul_(sharpen)
    return Policy(name, model, tok, use_chat_template=False)
