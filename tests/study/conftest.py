"""Fixtures shared by the study tests."""

import pytest

from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    """A random tiny Llama saved as a folder: a named-checkpoint stand-in that needs no warm-up."""
    folder = tmp_path_factory.mktemp("random-model")
    tok = build_char_tokenizer()
    build_tiny_model(tok, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)
