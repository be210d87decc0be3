"""Shared fixtures: one warm Sandbox per test module (starting workers takes ~0.1 s each)."""

from __future__ import annotations

import pytest
from sandbox_test_helpers import FAST_LIMITS

from teamrl.sandbox import Sandbox


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(FAST_LIMITS, workers=2) as box:
        yield box
