"""Several LoRA adapters on one frozen base model in memory (PEFT), one per policy.

The base is loaded once and wrapped by `peft.get_peft_model`; every further policy on the same base
is one more `add_adapter`. A policy runs its adapter after `set_adapter` (see `Policy.model`), its
optimizer holds only that adapter's tensors (`adapter_parameters`), and its KL reference is the base
with every adapter switched off (`AdaptersDisabled`), so no copy of the base is ever made.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import peft
import torch
from transformers import PreTrainedModel

from teamrl.config import ConfigError, LoraConfig


def peft_config(settings: LoraConfig) -> peft.LoraConfig:
    """The PEFT LoraConfig of teamrl's settings (a causal LM adapter)."""
    return peft.LoraConfig(
        r=settings.r,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
        bias="none",
        task_type=peft.TaskType.CAUSAL_LM,
    )


def check_target_modules(model: torch.nn.Module, settings: LoraConfig, policy: str, source: str) -> None:
    """Every target module name must be the last name component of at least one Linear of the base."""
    linear = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    missing = [m for m in settings.target_modules if m not in linear]
    if missing:
        raise ConfigError(
            f"policies.{policy}.lora.target_modules: {', '.join(missing)} not found in {source}; "
            f"its linear layers are named {', '.join(sorted(linear))}"
        )


@contextmanager
def peft_wrapping() -> Iterator[None]:
    """PEFT reads `model.is_gradient_checkpointing` when it wraps a model, which transformers 5 deprecates
    with a FutureWarning on every run; the attribute's value is all PEFT needs, so that one warning is dropped."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def attach_adapters(base: PreTrainedModel, adapters: Mapping[str, LoraConfig]) -> peft.PeftModel:
    """Wrap `base` (frozen) with one LoRA adapter per entry (name -> settings); returns the PEFT model."""
    names = list(adapters)
    if not names:
        raise ValueError("attach_adapters needs at least one adapter")
    with peft_wrapping():
        model = peft.get_peft_model(base, peft_config(adapters[names[0]]), adapter_name=names[0])
    for name in names[1:]:
        model.add_adapter(name, peft_config(adapters[name]))
    for name in names:  # PEFT records the base only for the first adapter; export needs it for each
        model.peft_config[name].base_model_name_or_path = base.name_or_path
    return model


def adapter_parameters(model: torch.nn.Module, adapter: str) -> list[torch.nn.Parameter]:
    """The tensors of one adapter: parameters named `...lora_*.<adapter>...` (never the base)."""
    params = []
    for name, param in model.named_parameters():
        parts = name.split(".")
        if any(p.startswith("lora_") and i + 1 < len(parts) and parts[i + 1] == adapter for i, p in enumerate(parts)):
            params.append(param)
    if not params:
        raise ValueError(f"the model has no parameters of adapter {adapter!r}")
    return params


def activate(model: peft.PeftModel, adapter: str) -> None:
    """Make `adapter` the one that runs (and the only one that takes gradients); no-op when it already is.

    The gradients the previous adapter's last update left behind are dropped: code that collects
    `p.grad` over the whole network (gradient clipping, diagnostics, all-reduce) must see only the
    active adapter's.
    """
    if model.active_adapter == adapter:
        return
    model.set_adapter(adapter)
    for param in model.parameters():
        if param.grad is not None and not param.requires_grad:
            param.grad = None


class AdaptersDisabled(torch.nn.Module):
    """The base under a PEFT model with all adapters off: a LoRA policy's frozen KL reference, no copy.

    Not a submodule holder on purpose: `.train()`, `.to()` or `.requires_grad_()` on the reference
    must not reach the live model.
    """

    _peft: Any  # the peft.PeftModel, set through __dict__ so that it is no submodule

    def __init__(self, model: peft.PeftModel) -> None:
        super().__init__()
        self.__dict__["_peft"] = model

    def parameters(self, recurse: bool = True):
        return self._peft.parameters(recurse)

    def get_base_model(self) -> torch.nn.Module:
        return self._peft.get_base_model()

    @property
    def config(self):
        """The base model's config (what scoring asks of a model, e.g. its attention layers)."""
        return self._peft.get_base_model().config

    def forward(self, **inputs):
        with self._peft.disable_adapter():
            return self._peft(**inputs)
