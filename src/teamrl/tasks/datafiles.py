"""Where the benchmark data files live and how they are read: one answer for every loader (math, code, ...)."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DATA_DIR_ENV = "TEAMRL_DATA_DIR"


def default_data_dir() -> Path:
    """``$TEAMRL_DATA_DIR``, else ``<repo>/../shared/datasets``; a clear error when neither exists."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"{DATA_DIR_ENV}={env!r} is not a directory")
        return path
    beside = checkout_data_dir()
    if beside is not None and beside.is_dir():
        return beside
    raise FileNotFoundError(
        f"no data directory found (tried: {beside or 'no repository root above this package'}); "
        f"set {DATA_DIR_ENV} to the folder holding the benchmark files (gsm8k_test.jsonl, HumanEval.jsonl.gz, ...); "
        "`teamrl data` lists them and where to get them"
    )


def checkout_data_dir() -> Path | None:
    """``shared/datasets`` beside the checkout this package runs from (None for an installed package).

    The repository root is the first ancestor of this file holding pyproject.toml.
    """
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file():
            return parent.parent / "shared" / "datasets"
    return None


class DatasetFormatError(ValueError):
    """A dataset file or record does not have the expected format (the message names file and line)."""


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each non-blank line of a JSON-lines file (`.gz` allowed).

    A line that is not JSON, or not a JSON object, raises `DatasetFormatError` naming the file and line.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetFormatError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(record, dict):
                raise DatasetFormatError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
            yield lineno, record
