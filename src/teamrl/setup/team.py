"""Config -> workflow, policies and the agent -> policy mapping."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from teamrl.config import ConfigError, PolicyConfig, RunConfig
from teamrl.config.tasks import task_entry
from teamrl.policies.assemble import load_policies
from teamrl.policies.loading import Policy, check_device, check_model_source
from teamrl.policies.mapping import agent_policy_mapping
from teamrl.policies.storage import CHECKPOINT_MARKER, load_policy_weights
from teamrl.rollout.engine_routing import serve_with_vllm
from teamrl.setup.model_sources import check_named_source, is_gguf_path, named_checkpoint, resolve_model_source
from teamrl.setup.real_model_checks import warn_about_settings
from teamrl.setup.tiny_default import WarmupRecipe, warm_up
from teamrl.workflows.base import Workflow

TINY_DEFAULT = "tiny-default"


def build_workflow(config: RunConfig) -> Workflow:
    wf = config.workflow
    entry = task_entry(config.task["name"])
    return entry.build(
        wf.name,
        config.task_settings(),
        max_turns=wf.max_turns,
        prompt_style=wf.prompt_style,
        format_bonus=wf.format_bonus,
    )


def resolve_model_path(config: RunConfig, model: str | None = None) -> str:
    """A loadable model path for `model` (default: policy.model); 'tiny-default' is warmed up
    (or taken from the cache) for this task."""
    model = model or config.policy.model
    if model != TINY_DEFAULT:
        return resolve_model_source(model)  # a shipped checkpoint or a .gguf: its converted, cached folder
    kind = "team" if config.workflow.name == "single" else config.workflow.name
    return str(
        warm_up(
            WarmupRecipe.for_task(config.task, config.workflow.max_turns, kind, steps=config.policy.warmup_sft_steps)
        )
    )


def agent_mapping(config: RunConfig, workflow: Workflow) -> dict[str, str]:
    """Agent name -> policy name: the `roles:` mapping, or the `regime` preset when it is empty."""
    return agent_policy_mapping(config.regime, config.roles, config.policies, workflow.agents)


def policy_settings(
    config: RunConfig, mapping: dict[str, str], model_path: str | None = None
) -> dict[str, PolicyConfig]:
    """Each used policy's settings with `model` resolved to a loadable path.

    model_path: used instead of warming up wherever a policy's model is 'tiny-default'.
    """
    names = list(dict.fromkeys(mapping.values()))
    check_policy_sources(config, names)  # before any warm-up: a bad path or device fails in a second
    settings, resolved = {}, {}
    for name in names:
        cfg = config.policy_config(name)
        if cfg.model not in resolved:
            use = model_path if model_path and cfg.model == TINY_DEFAULT else None
            resolved[cfg.model] = use or resolve_model_path(config, cfg.model)
        settings[name] = dataclasses.replace(cfg, model=resolved[cfg.model])
    return settings


def check_policy_sources(config: RunConfig, names: list[str]) -> None:
    """Each policy's model and tokenizer path and device usable here, or an error naming the key."""
    for name in names:
        cfg = config.policy_config(name)
        section = f"policies.{name}." if name in config.policies else "policy."
        check_device(section + "device", cfg.device)
        if named_checkpoint(cfg.model) or is_gguf_path(cfg.model):
            check_named_source(section + "model", cfg.model)
        elif cfg.model != TINY_DEFAULT:
            check_model_source(section + "model", cfg.model)
        if cfg.tokenizer and Path(cfg.tokenizer).expanduser().is_file():
            raise FileNotFoundError(f"{section}tokenizer = {cfg.tokenizer!r} is a file; give a tokenizer folder")


def build_policies(
    config: RunConfig, workflow: Workflow, model_path: str | None = None, training: bool = True
) -> tuple[dict[str, Policy], dict[str, str]]:
    """The policies of the agent -> policy mapping, loaded; LoRA policies on one base share it.

    training: whether they are about to be trained (else sampling-only settings are not warned about).
    Returns (policies by name, agent name -> policy name). With rollout.engine: vllm they are served by
    vLLM engines (`teamrl.rollout.engine_routing`); `teamrl.rollout.sampler.release` closes them.
    """
    mapping = agent_mapping(config, workflow)
    policies = load_policies(policy_settings(config, mapping, model_path))
    warn_about_settings(
        config, policies, mapping, {a.name: a.role for a in workflow.agents}, training
    )  # tiny-model settings on a real LLM, pure bf16
    return on_configured_engine(config, policies), mapping


def on_configured_engine(config: RunConfig, policies: dict[str, Policy]) -> dict[str, Policy]:
    """`policies`, sampled from now on by the run's `rollout.engine` (vllm: vLLM engines are started)."""
    if config.rollout.engine == "vllm":
        serve_with_vllm(policies, config.rollout.vllm_kv_cache_gb, config.seed)
    return policies


def policies_from_checkpoint(
    config: RunConfig, workflow: Workflow, folder: Path
) -> tuple[dict[str, Policy], dict[str, str]]:
    """The configured policies with the weights of a checkpoint (checkpoints/<tag>/<policy>/), sampled by
    the config's `rollout.engine` (as `build_policies`'s are).

    `folder` may instead be one HF model folder: then every policy is a full copy of it.
    """
    if not folder.is_dir():
        raise ConfigError(f"--checkpoint {folder} is not a folder")
    _refuse_run_directory(folder)
    mapping = agent_mapping(config, workflow)
    if (folder / "config.json").is_file():
        settings = {
            name: dataclasses.replace(config.policy_config(name), model=str(folder), tokenizer="", lora=None)
            for name in dict.fromkeys(mapping.values())
        }
        return on_configured_engine(config, load_policies(settings)), mapping
    missing = [name for name in dict.fromkeys(mapping.values()) if not (folder / name).is_dir()]
    if missing:
        raise ConfigError(
            f"--checkpoint {folder} has no folder for policies {', '.join(missing)}; "
            "it was written for another regime or `roles:` mapping"
        )
    # Full policies load straight from their folders; adapters need their base, which the adapter
    # folder names. Neither needs the tiny default to be warmed up again.
    settings = {}
    for name in dict.fromkeys(mapping.values()):
        cfg = config.policy_config(name)
        if cfg.lora is None:
            settings[name] = dataclasses.replace(cfg, model=str(folder / name), tokenizer="")
        else:
            base = _recorded_base(folder / name) or resolve_model_path(config, cfg.model)
            settings[name] = dataclasses.replace(cfg, model=base)
    policies = load_policies(settings)
    for name, cfg in settings.items():
        if cfg.lora is not None:
            load_policy_weights(policies[name], folder / name)
    return on_configured_engine(config, policies), mapping


def _refuse_run_directory(folder: Path) -> None:
    """A run directory (or its checkpoints/ folder) given where one checkpoint is expected: name the ones in it."""
    if (folder / "checkpoints").is_dir() and (folder / "metrics.jsonl").exists():
        root = folder / "checkpoints"
    elif folder.name == "checkpoints" and (folder.parent / "metrics.jsonl").exists():
        root = folder
    else:
        return
    tags = sorted(p.name for p in root.iterdir() if (p / CHECKPOINT_MARKER).is_file())
    suggestion = root / "final" if "final" in tags else (root / tags[-1] if tags else None)
    found = f"its checkpoints: {', '.join(tags)}" if tags else "it holds no complete checkpoint yet"
    hint = f"; use --checkpoint {suggestion}" if suggestion else ""
    raise ConfigError(f"--checkpoint {folder} is a run directory, not a checkpoint ({found}){hint}")


def _recorded_base(adapter_folder: Path) -> str | None:
    """The base model an adapter folder was trained on, when that folder still exists here."""
    config_file = adapter_folder / "adapter_config.json"
    if not config_file.is_file():
        return None
    base = json.loads(config_file.read_text()).get("base_model_name_or_path")
    return base if base and Path(base).is_dir() else None
