"""Benchmark data in the tests: a few records of each public set under tests/data (NOTICE), and
the full files when they are found (TEAMRL_DATA_DIR, else ../shared/datasets beside the checkout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrl.tasks.datafiles import default_data_dir

SUBSET_DIR = Path(__file__).parent / "data"


def full_data_dir() -> Path | None:
    """The folder of the full benchmark files, or None when there is none."""
    try:
        return default_data_dir()
    except FileNotFoundError:
        return None


def needs_full_data(*names: str) -> pytest.MarkDecorator:
    """Skip unless the full benchmark files `names` are found, saying how to provide them."""
    found = full_data_dir()
    missing = [name for name in names if found is None or not (found / name).is_file()]
    return pytest.mark.skipif(bool(missing), reason=(
        f"needs the full benchmark file(s) {', '.join(missing)}: set TEAMRL_DATA_DIR to the folder holding them "
        "(`teamrl data` shows where data sets are looked for)"))
