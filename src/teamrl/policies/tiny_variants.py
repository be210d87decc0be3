"""A second tiny base of another architecture and tokenizer: a Qwen2 over a small BPE vocabulary.

The tiny default (`tiny_model`) is a Llama over characters. This variant differs in both: a
`Qwen2ForCausalLM` (biased q/k/v projections, grouped-query attention, untied embeddings) over a BPE
byte-level BPE tokenizer trained offline on text the caller gives (a task's demonstrations), so
words such as `calc` or `=>` are one token and the same prompt gets other ids and another length
than under the default.
Both are built offline and saved with `save_pretrained`, so they load through `AutoTokenizer` /
`AutoModelForCausalLM` like any hub model.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from teamrl.policies.tiny_model import SPECIAL_TOKENS


def build_bpe_tokenizer(texts: Iterable[str], vocab_size: int = 320) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on `texts`, as `AutoTokenizer` loads it beside a Qwen2 model.

    Byte-level, as Qwen2's own: `AutoTokenizer` rebuilds the tokenizer of a folder whose config.json
    says qwen2 as a `Qwen2Tokenizer` from the vocabulary and merges, with Qwen2's pre-tokenizer (digits
    one by one, words split from punctuation). The trained tokenizer is therefore saved and loaded
    back that way here, so the warm-up trains on exactly the ids a later `AutoTokenizer` load gives.
    """
    specials = list(SPECIAL_TOKENS.values())
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(specials) + len(alphabet):
        raise ValueError(
            f"vocab_size must be at least {len(specials) + len(alphabet)} (the special tokens and "
            f"the 256 bytes), got {vocab_size}"
        )
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=alphabet, show_progress=False
    )
    core.train_from_iterator(texts, trainer)
    trained = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=SPECIAL_TOKENS["pad"],
        eos_token=SPECIAL_TOKENS["eos"],
        unk_token=SPECIAL_TOKENS["unk"],
    )
    with tempfile.TemporaryDirectory() as folder:
        trained.save_pretrained(folder)
        (Path(folder) / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
        return AutoTokenizer.from_pretrained(folder)


def build_tiny_qwen2(
    tokenizer: PreTrainedTokenizerFast,
    hidden_size: int = 96,
    num_layers: int = 3,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 256,
    max_positions: int = 256,
    seed: int = 0,
) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2 with grouped-query attention and untied embeddings (~0.4M parameters)."""
    if num_heads % num_kv_heads or hidden_size % num_heads:
        raise ValueError(
            f"hidden_size ({hidden_size}) must divide by num_heads ({num_heads}) and num_heads by "
            f"num_kv_heads ({num_kv_heads})"
        )
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)
