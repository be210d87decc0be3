"""A study's results.json, safe to update from several processes (one per seed group, `--jobs`).

Every update takes an exclusive lock on a sidecar file, reads the latest results from disk, changes
them and writes them back atomically (a temporary file renamed over the old one), so two processes
that finish rows at the same time both keep their rows and a reader never sees half a file.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

Results = dict[str, Any]


@contextmanager
def _locked(target: Path) -> Iterator[None]:
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read(target: Path) -> Results | None:
    """The results on disk, or None when there are none yet."""
    return json.loads(target.read_text()) if target.is_file() else None


def update(target: Path, fresh: Results, change: Callable[[Results], None]) -> Results:
    """Apply `change` to the results on disk (or to `fresh` when there are none) and write them back.

    Returns the results as written. Concurrent callers are serialised by a file lock.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target):
        results = read(target) or json.loads(json.dumps(fresh))  # a copy: `fresh` stays as given
        change(results)
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(results, indent=2))
        os.replace(partial, target)
    return results


def add_record(results: Results, record: dict[str, Any]) -> None:
    """Put one (row, seed) result in, replacing an earlier one of the same row and seed."""
    key = (record["row"], record["seed"])
    results["results"] = [r for r in results["results"] if (r["row"], r["seed"]) != key] + [record]
    results["seconds"] = sum(r.get("seconds", 0.0) for r in results["results"])
