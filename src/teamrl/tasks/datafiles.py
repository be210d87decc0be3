"""Where the benchmark data files live: one answer for every loader (math, code, ...)."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "TEAMRL_DATA_DIR"


def default_data_dir() -> Path:
    """``$TEAMRL_DATA_DIR``, else ``<repo>/../shared/datasets``; a clear error when neither exists."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"{DATA_DIR_ENV}={env!r} is not a directory")
        return path
    tried = []
    # The repository root is the first ancestor of this file holding pyproject.toml.
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file():
            candidate = parent.parent / "shared" / "datasets"
            if candidate.is_dir():
                return candidate
            tried.append(str(candidate))
            break
    raise FileNotFoundError(
        f"no data directory found (tried: {', '.join(tried) or 'no repository root above this package'}); "
        f"set {DATA_DIR_ENV} to the folder holding the benchmark files (gsm8k_test.jsonl, HumanEval.jsonl.gz, ...)"
    )
