"""Loading a policy (an HF causal LM and its tokenizer) and turning role prompts into token ids."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Policy:
    """A trainable model with its tokenizer; several roles may share one."""

    name: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    use_chat_template: bool

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode_prompt(self, text: str) -> list[int]:
        """Token ids of a role prompt, wrapped in the chat template when the tokenizer has one."""
        if self.use_chat_template:
            messages = [{"role": "user", "content": text}]
            # enable_thinking is read by Qwen3 templates and ignored by the others.
            rendered = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
            )
            return self.tokenizer(rendered, add_special_tokens=False)["input_ids"]
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def stop_token_ids(self) -> list[int]:
        """Token ids that end a response: EOS, plus the chat template's end-of-turn token."""
        ids = {self.tokenizer.eos_token_id}
        for token in ("<|im_end|>", "<|eot_id|>", "<|end|>"):
            tid = self.tokenizer.convert_tokens_to_ids(token)
            if isinstance(tid, int) and tid != self.tokenizer.unk_token_id and tid >= 0:
                ids.add(tid)
        return sorted(i for i in ids if i is not None)


def load_policy(
    name: str,
    model_path: str,
    dtype: str = "float32",
    device: str = "cpu",
    chat_template: str = "auto",
) -> Policy:
    """Load `model_path` (a local folder or a hub name) with AutoModelForCausalLM/AutoTokenizer.

    chat_template: 'auto' uses the tokenizer's template when it has one, 'on' requires it,
    'off' feeds the raw prompt text.
    """
    if dtype not in DTYPES:
        raise ValueError(f"policy {name!r}: dtype {dtype!r} unknown; use one of {sorted(DTYPES)}")
    if chat_template not in ("auto", "on", "off"):
        raise ValueError(f"policy {name!r}: chat_template must be auto, on or off, got {chat_template!r}")
    local = Path(model_path).expanduser()
    if (local.exists() and not (local / "config.json").exists()):
        raise FileNotFoundError(
            f"policy {name!r}: {local} exists but has no config.json; point model at a folder "
            "written by save_pretrained (or run `teamrl warmup` for the tiny default)"
        )
    source = str(local) if local.exists() else model_path
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=DTYPES[dtype])
    except OSError as err:
        raise FileNotFoundError(
            f"policy {name!r}: could not load model {model_path!r} ({err}). Give a local folder "
            "with config.json and weights; this machine cannot download from a hub."
        ) from err
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if chat_template == "on" and not has_template:
        raise ValueError(f"policy {name!r}: chat_template: on, but {model_path} has no chat template")
    model.to(device)
    return Policy(name, model, tokenizer, use_chat_template=has_template and chat_template != "off")
