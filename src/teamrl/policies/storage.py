"""A policy's weights on disk: HF model folders (full policies), PEFT adapter folders (LoRA policies).

- `save_policy(policy, folder)`: a full policy -> save_pretrained (config.json + model.safetensors);
  a LoRA policy -> adapter_config.json + adapter_model.safetensors of its adapter only (the shared
  base is not copied; adapter_config.json names it in `base_model_name_or_path`). The tokenizer is
  written beside either, so the folder is self-contained for `export_merged` and `teamrl eval`.
- `load_policy_weights(policy, folder)`: the inverse, into an already built policy (same base).
- `export_merged(folder, out)`: an adapter folder -> a plain HF model with the adapter merged in;
  `export_checkpoint` does it for every policy of a checkpoint (`teamrl export`).
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import torch
from peft import PeftModel, get_peft_model_state_dict, set_peft_model_state_dict
from safetensors.torch import load_file, save_file

from teamrl.policies.loading import Policy, load_model, load_tokenizer
from teamrl.policies.lora import peft_wrapping

CHECKPOINT_MARKER = "COMPLETE"
"""The file a checkpoint folder (checkpoints/<tag>/, one folder per policy) holds once it is complete:
written last, by `teamrl.training.checkpoint`; readers of a checkpoint look for it."""
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def is_adapter_folder(folder: str | Path) -> bool:
    return (Path(folder) / ADAPTER_CONFIG).is_file()


def save_policy(policy: Policy, folder: str | Path) -> Path:
    """Write `policy` (its adapter only, for a LoRA policy) and its tokenizer to `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = policy.model
    if policy.adapter is None:
        model.save_pretrained(folder)
    else:
        config = copy.deepcopy(model.peft_config[policy.adapter])
        config.inference_mode = True  # as PEFT writes it: loads frozen unless asked otherwise
        config.save_pretrained(str(folder))
        state = get_peft_model_state_dict(model, adapter_name=policy.adapter)
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in state.items()},
            str(folder / ADAPTER_WEIGHTS),
            metadata={"format": "pt"},
        )
    policy.tokenizer.save_pretrained(folder)
    return folder


def load_policy_weights(policy: Policy, folder: str | Path) -> None:
    """Load weights written by `save_policy` into `policy` in place (a LoRA policy: only its adapter)."""
    folder = Path(folder)
    if policy.adapter is not None:
        if not is_adapter_folder(folder):
            raise FileNotFoundError(
                f"policy {policy.name!r} is a LoRA policy but {folder} holds no "
                f"{ADAPTER_CONFIG}; give the folder save_policy wrote for it"
            )
        result = set_peft_model_state_dict(
            policy.model, load_file(str(folder / ADAPTER_WEIGHTS)), adapter_name=policy.adapter
        )
        mine = [k for k in result.missing_keys if f".{policy.adapter}." in k and "lora_" in k]
        if mine or result.unexpected_keys:
            raise ValueError(
                f"{folder}: adapter weights do not fit policy {policy.name!r} "
                f"(missing {mine[:3]}, unexpected {result.unexpected_keys[:3]})"
            )
        return
    if is_adapter_folder(folder):
        raise ValueError(
            f"policy {policy.name!r} is a full model but {folder} holds a LoRA adapter; "
            "set the policy's `lora` settings as in the run that wrote it"
        )
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} holds no *.safetensors weights for policy {policy.name!r}")
    state: dict[str, torch.Tensor] = {}
    for file in files:
        state.update(load_file(str(file)))
    model = policy.model
    missing, unexpected = model.load_state_dict(state, strict=False)
    # save_pretrained leaves out tied copies (lm_head = embed_tokens): those may be missing.
    own = model.state_dict()
    loaded = {own[k].data_ptr() for k in state if k in own}
    untied = [k for k in missing if own[k].data_ptr() not in loaded]
    if untied or unexpected:
        raise ValueError(
            f"{folder}: weights do not fit policy {policy.name!r} (missing {untied[:3]}, unexpected {unexpected[:3]})"
        )


def export_merged(folder: str | Path, out: str | Path, base: str | None = None, dtype: str = "float32") -> Path:
    """Merge the adapter in `folder` into its base and save a plain HF model (+ tokenizer) to `out`.

    base: the base model folder; default: `base_model_name_or_path` of the adapter's config.
    """
    folder, out = Path(folder), Path(out)
    if not is_adapter_folder(folder):
        raise FileNotFoundError(f"{folder} has no {ADAPTER_CONFIG}: not a LoRA adapter folder")
    base = base or json.loads((folder / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{folder / ADAPTER_CONFIG} does not name its base model; pass base=")
    with peft_wrapping():
        model = PeftModel.from_pretrained(load_model(folder.name, base, dtype), str(folder))
    merged = model.merge_and_unload()
    merged.save_pretrained(out)
    tokenizer_source = folder if (folder / "tokenizer_config.json").exists() else Path(base)
    load_tokenizer(folder.name, str(tokenizer_source)).save_pretrained(out)
    return out


def export_checkpoint(checkpoint: str | Path, out: str | Path, base: str | None = None) -> list[tuple[Path, Path]]:
    """Every policy folder of a checkpoint as a plain HF model under out/<policy>/.

    Adapter folders are merged into their base; full-model folders are copied. `checkpoint` may
    also be one policy's folder, written to `out` itself. Returns (source, written) pairs.
    """
    checkpoint, out = Path(checkpoint), Path(out)
    if not checkpoint.is_dir():
        raise FileNotFoundError(f"{checkpoint} is not a folder; give checkpoints/<tag> of a run")
    if is_adapter_folder(checkpoint) or (checkpoint / "config.json").is_file():
        folders = [(checkpoint, out)]
    else:
        folders = [
            (sub, out / sub.name)
            for sub in sorted(checkpoint.iterdir())
            if sub.is_dir() and (is_adapter_folder(sub) or (sub / "config.json").is_file())
        ]
    if not folders:
        raise FileNotFoundError(f"{checkpoint} holds no policy folder (adapter_config.json or config.json)")
    for source, target in folders:
        if is_adapter_folder(source):
            export_merged(source, target, base)
        else:
            shutil.copytree(source, target, dirs_exist_ok=True)
    return folders
