"""A random tiny model folder shared by the benchmark tests (no warm-up; a step in about a second)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import teamrl_steps


@pytest.fixture(scope="session")
def small_model_dir(tmp_path_factory) -> Path:
    steps = teamrl_steps
    return steps.save_random_llama(tmp_path_factory.mktemp("bench-model"), hidden=32, layers=1, heads=2,
                                   intermediate=64)
