"""The embedded default model: a tiny Llama-architecture causal LM over a character vocabulary.

Everything is built offline: the tokenizer is a real `PreTrainedTokenizerFast` (saved with
`save_pretrained`, loaded back with `AutoTokenizer`), the model a real `LlamaForCausalLM`, so the
tiny default goes through exactly the code path of a hub model.
"""

from __future__ import annotations

import string

import torch
from tokenizers import Tokenizer, decoders, models
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL_TOKENS = {"pad": "<pad>", "eos": "<eos>", "unk": "<unk>"}
# Printable ASCII plus newline: enough for prompts, programs and action lists.
CHARACTERS = [c for c in string.printable if c not in "\t\r\x0b\x0c"]


def build_char_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character; unknown characters map to <unk>."""
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS.values())}
    for ch in CHARACTERS:
        vocab[ch] = len(vocab)
    # A BPE model without merges and without a pre-tokenizer splits text into characters.
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=SPECIAL_TOKENS["unk"]))
    core.decoder = decoders.Fuse()  # join characters back without inserting spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=SPECIAL_TOKENS["pad"],
        eos_token=SPECIAL_TOKENS["eos"],
        unk_token=SPECIAL_TOKENS["unk"],
    )


def build_tiny_model(
    tokenizer: PreTrainedTokenizerFast,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    intermediate_size: int = 384,
    max_positions: int = 512,
    seed: int = 0,
) -> LlamaForCausalLM:
    """A randomly initialised Llama with tied embeddings (about 0.8M parameters by default)."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)
