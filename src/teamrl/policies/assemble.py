"""Named policy settings -> loaded policies: full models, and LoRA adapters sharing one base each.

LoRA policies on the same base `model` become adapters of one PEFT model (the base is loaded once);
each full policy gets its own copy of its model. Policies on different bases (heterogeneous teams)
keep their own tokenizers and chat templates.
"""

from __future__ import annotations

from collections.abc import Mapping

from teamrl.config import ConfigError, LoraConfig, PolicyConfig
from teamrl.policies.loading import (
    Policy,
    enable_activation_checkpointing,
    load_model,
    load_policy,
    load_tokenizer,
    uses_chat_template,
)
from teamrl.policies.lora import attach_adapters, check_target_modules

# Settings the adapters on one in-memory base necessarily have in common.
SHARED_BY_ADAPTERS = ("tokenizer", "dtype", "device", "cpu_linear", "chat_template", "activation_checkpointing")


def lora_groups(settings: Mapping[str, PolicyConfig]) -> dict[str, list[str]]:
    """Base model -> the LoRA policies on it, checking that they agree on what they must share."""
    groups: dict[str, list[str]] = {}
    for name, cfg in settings.items():
        if cfg.lora is not None:
            groups.setdefault(cfg.model, []).append(name)
    for base, names in groups.items():
        first = settings[names[0]]
        for name in names[1:]:
            for key in SHARED_BY_ADAPTERS:
                mine, theirs = getattr(settings[name], key), getattr(first, key)
                if mine != theirs:
                    raise ConfigError(
                        f"policies {names[0]} and {name} are LoRA adapters on one base ({base}), so they "
                        f"share its {key}, but set {theirs!r} and {mine!r}; make them equal, or drop "
                        f"`lora` from one to give it its own full copy"
                    )
    return groups


def load_policies(settings: Mapping[str, PolicyConfig]) -> dict[str, Policy]:
    """Load every policy; `settings[name].model` must already be a loadable path or hub name."""
    policies: dict[str, Policy] = {}
    for base, names in lora_groups(settings).items():
        first = settings[names[0]]
        model = load_model(names[0], base, first.dtype, first.device, first.cpu_linear)
        loras: dict[str, LoraConfig] = {}
        for name in names:
            lora = settings[name].lora
            assert lora is not None  # lora_groups groups LoRA policies only
            check_target_modules(model, lora, name, base)
            loras[name] = lora
        network = attach_adapters(model, loras)
        tokenizer = load_tokenizer(names[0], first.tokenizer or base)
        use_template = uses_chat_template(names[0], tokenizer, first.chat_template, first.tokenizer or base)
        for name in names:
            policies[name] = Policy(
                name, network, tokenizer, use_template, adapter=name, system_prompt=settings[name].system_prompt
            )
    for name, cfg in settings.items():
        if cfg.lora is None:
            policies[name] = load_policy(
                name,
                cfg.model,
                cfg.dtype,
                cfg.device,
                cfg.chat_template,
                cfg.tokenizer,
                cfg.system_prompt,
                cfg.cpu_linear,
            )
        if cfg.activation_checkpointing:
            enable_activation_checkpointing(policies[name].network)  # once per shared base: it is idempotent
    return {name: policies[name] for name in settings}
