"""Loading a policy (an HF causal LM and its tokenizer) and turning role prompts into token ids."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from teamrl.config import ConfigError
from teamrl.config.options import CpuLinear
from teamrl.policies.chat_encoding import Messages, encode_chat
from teamrl.policies.cpu_linear import resolve_cpu_linear, use_onednn_linears

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_RECOMPUTED: dict[type, type] = {}  # MLP class -> its recomputing subclass (one per class)


@dataclass
class Policy:
    """A trainable model with its tokenizer; several agents may share one.

    A LoRA policy (`adapter` set) shares `network`, a PEFT model, with the other adapters on its
    base; reading `model` switches that network to this policy's adapter, so whatever runs
    `policy.model` (sampling, scoring, updates, saving) runs this policy and no other.
    """

    name: str
    network: PreTrainedModel  # the full model, or the PEFT model shared by the adapters on one base
    tokenizer: PreTrainedTokenizerBase
    use_chat_template: bool
    adapter: str | None = None  # the PEFT adapter of this policy; None: the whole network is the policy
    system_prompt: str = ""  # a system message before every prompt ("": the template's own default, if any)

    @property
    def model(self) -> PreTrainedModel:
        """The network to run, with this policy's adapter active."""
        if self.adapter is not None:
            from teamrl.policies.lora import activate

            activate(self.network, self.adapter)
        return self.network

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode_prompt(self, prompt: str | Messages, tools: list[dict] | None = None) -> list[int]:
        """Token ids of a role prompt (text, or chat messages for a multi-turn history), wrapped in the
        chat template when the tokenizer has one; message content is always tokenized as plain text
        (`teamrl.policies.chat_encoding`), so no agent can write special tokens into another's prompt.
        tools: OpenAI function tools for a template that renders them."""
        return encode_chat(
            self.tokenizer, prompt, use_template=self.use_chat_template, system_prompt=self.system_prompt, tools=tools
        )

    def stop_token_ids(self) -> list[int]:
        """Token ids that end a response: EOS, plus the chat template's end-of-turn token."""
        ids = {self.tokenizer.eos_token_id}
        for token in ("<|im_end|>", "<|eot_id|>", "<|end|>"):
            tid = self.tokenizer.convert_tokens_to_ids(token)
            if isinstance(tid, int) and tid != self.tokenizer.unk_token_id and tid >= 0:
                ids.add(tid)
        return sorted(i for i in ids if i is not None)


def check_model_source(key: str, path: str) -> None:
    """Fail early, naming `key`, when `path` is meant as a local model folder but is not one.

    A path that exists must be a folder with config.json (what save_pretrained writes); a path that
    does not exist but is spelled like a local one (absolute, ./, ../ or ~) is reported as missing
    instead of being sent to the hub as a model name.
    """
    local = Path(path).expanduser()
    if local.is_file():
        raise FileNotFoundError(
            f"{key} = {path!r} is a file, not a model folder; point it at a folder "
            "written by save_pretrained (with config.json and the weights)"
        )
    if local.is_dir() and not (local / "config.json").is_file():
        raise FileNotFoundError(
            f"{key} = {path!r} is a folder without config.json, so not a model; point it "
            "at a folder written by save_pretrained (or use tiny-default)"
        )
    if not local.exists() and path.startswith(("/", "./", "../", "~")):
        raise FileNotFoundError(
            f"{key} = {path!r}: no such folder; give a model folder written by save_pretrained (or use tiny-default)"
        )


def device_problem(device: str) -> str | None:
    """Why a model cannot be put on torch device `device` on this machine, or None when it can."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        return "is not a torch device; use cpu, cuda or cuda:N"
    if parsed.type == "cuda":
        if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
            return (
                f"needs a CUDA build of torch, but this torch ({torch.__version__}) is CPU-only; use "
                "policy.device=cpu, or install a CUDA build of torch"
            )
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            return "but no CUDA GPU is visible here (check nvidia-smi and CUDA_VISIBLE_DEVICES); use policy.device=cpu"
        if parsed.index is not None and parsed.index >= count:
            return f"but this machine shows {count} GPU(s): cuda:0 to cuda:{count - 1}"
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        return "but MPS (Apple GPU) is not available here; use policy.device=cpu"
    elif parsed.type not in ("cpu", "cuda", "mps"):
        return "is not a device teamrl trains on; use cpu, cuda or cuda:N"
    return None


def check_device(key: str, device: str) -> None:
    """Raise ConfigError naming `key` when `device` is unusable here (see `device_problem`)."""
    problem = device_problem(device)
    if problem is not None:
        raise ConfigError(f"{key} = {device!r} {problem}")


def _local_or_hub(path: str) -> str:
    """`path` with ~ expanded when it exists here; otherwise unchanged (a hub name)."""
    local = Path(path).expanduser()
    return str(local) if local.exists() else path


def _not_found(name: str, what: str, path: str, err: Exception) -> FileNotFoundError:
    return FileNotFoundError(
        f"policy {name!r}: could not load {what} {path!r} ({str(err).strip().splitlines()[0]}). Give a local "
        "folder written by save_pretrained; this machine cannot download from a hub."
    )


def load_tokenizer(name: str, path: str) -> PreTrainedTokenizerBase:
    """AutoTokenizer from a folder or hub name, with a pad token (EOS when the tokenizer has none)."""
    try:
        tokenizer = AutoTokenizer.from_pretrained(_local_or_hub(path))
    except (OSError, ValueError) as err:  # ValueError: e.g. a config.json that names no known tokenizer
        raise _not_found(name, "tokenizer", path, err) from err
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(
    name: str, path: str, dtype: str = "float32", device: str = "cpu", cpu_linear: CpuLinear = "auto"
) -> PreTrainedModel:
    """AutoModelForCausalLM from a folder (or hub name) in `dtype` on `device`.

    cpu_linear: onednn turns a CPU model's large linear layers into `OneDnnLinear` (policies/cpu_linear.py); auto
    does where `resolve_cpu_linear` picks oneDNN for this host.
    """
    if dtype not in DTYPES:
        raise ValueError(f"policy {name!r}: dtype {dtype!r} unknown; use one of {sorted(DTYPES)}")
    check_model_source(f"policy {name!r}: model", path)
    check_device(f"policy {name!r}: device", device)
    try:
        model = AutoModelForCausalLM.from_pretrained(_local_or_hub(path), dtype=DTYPES[dtype])
    except (OSError, ValueError) as err:  # ValueError: e.g. a config.json of an unknown architecture
        raise _not_found(name, "model", path, err) from err
    if getattr(model, "is_quantized", False) or getattr(model.config, "quantization_config", None):
        method = getattr(getattr(model.config, "quantization_config", None), "quant_method", "a quantizer")
        raise ConfigError(
            f"policy {name!r}: the model in {path!r} is quantised ({getattr(method, 'value', method)}), so it can be "
            "neither trained nor saved; for a GGUF file give the .gguf itself as policy.model (teamrl converts it "
            "once to a plain model), otherwise a float model folder"
        )
    model = model.to(device)
    if resolve_cpu_linear(cpu_linear, device) == "onednn":
        use_onednn_linears(model)
    return model


def uses_chat_template(name: str, tokenizer: PreTrainedTokenizerBase, chat_template: str, source: str) -> bool:
    """chat_template: 'auto' uses the tokenizer's template when it has one, 'on' requires it, 'off' never."""
    if chat_template not in ("auto", "on", "off"):
        raise ValueError(f"policy {name!r}: chat_template must be auto, on or off, got {chat_template!r}")
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if chat_template == "on" and not has_template:
        raise ValueError(f"policy {name!r}: chat_template: on, but {source} has no chat template")
    return has_template and chat_template != "off"


def load_policy(
    name: str,
    model_path: str,
    dtype: str = "float32",
    device: str = "cpu",
    chat_template: str = "auto",
    tokenizer_path: str = "",
    system_prompt: str = "",
    cpu_linear: CpuLinear = "auto",
) -> Policy:
    """Load a full (every weight trainable) policy from `model_path`, a local folder or a hub name.

    tokenizer_path: where the tokenizer comes from when not from `model_path`.
    """
    # The model is checked first: a folder that is no model would otherwise fail as a tokenizer.
    check_model_source(f"policy {name!r}: model", model_path)
    check_device(f"policy {name!r}: device", device)
    tokenizer = load_tokenizer(name, tokenizer_path or model_path)
    use_template = uses_chat_template(name, tokenizer, chat_template, tokenizer_path or model_path)
    return Policy(
        name,
        load_model(name, model_path, dtype, device, cpu_linear),
        tokenizer,
        use_template,
        system_prompt=system_prompt,
    )


def decoder_layers(network: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of an HF model (its `_no_split_modules` classes), also under a PEFT wrapper."""
    # a PEFT wrapper's `get_base_model` and an HF model's `_no_split_modules` are attributes torch's typing cannot see
    inner: Any = network
    inner = inner.get_base_model() if hasattr(inner, "get_base_model") else inner
    names = set(getattr(inner, "_no_split_modules", None) or ())
    layers = [m for m in inner.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(
            f"{type(inner).__name__} names no decoder layer class (_no_split_modules); teamrl finds "
            "the transformer blocks through it"
        )
    return layers


class _Recomputed:
    """Mixin: in training with gradients on, run the module under non-reentrant activation checkpointing."""

    def forward(self, *args, **kwargs):
        if self.training and torch.is_grad_enabled():
            return checkpoint(super().forward, *args, use_reentrant=False, **kwargs)
        return super().forward(*args, **kwargs)


def enable_activation_checkpointing(network: torch.nn.Module) -> int:
    """Make every decoder layer's MLP recompute its activations in backward; returns how many (in place).

    Why not HF's `gradient_checkpointing_enable`: it checkpoints whole layers and therefore drops
    the KV cache, which the trainer's shared-prompt forward (policies/scoring.py) feeds from the
    prompt pass to the responses' pass; responses would be scored without their prompt. The MLP
    never touches the cache and holds most of a layer's activations (4 of its intermediate-size
    tensors per token), so it is what is recomputed. The module's class is swapped for a subclass,
    so parameter names, state dicts, deep copies (the KL reference) and PEFT adapters are unchanged.
    """
    count = 0
    for layer in decoder_layers(network):
        mlp = getattr(layer, "mlp", None)
        if not isinstance(mlp, torch.nn.Module):
            raise ValueError(
                f"policy.activation_checkpointing: {type(layer).__name__} has no `mlp` submodule to "
                "recompute; set policy.activation_checkpointing=false for this model"
            )
        cls = type(mlp)
        if not issubclass(cls, _Recomputed):
            if cls not in _RECOMPUTED:
                _RECOMPUTED[cls] = type(f"Recomputed{cls.__name__}", (_Recomputed, cls), {})
            mlp.__class__ = _RECOMPUTED[cls]
        count += 1
    return count
