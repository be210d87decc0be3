"""Fixtures shared by the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model


@pytest.fixture(scope="session")
def random_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised tiny model saved as an HF folder: no warm-up, a step in a fraction of a second."""
    folder = tmp_path_factory.mktemp("random-model")
    tok = build_char_tokenizer()
    build_tiny_model(tok, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
