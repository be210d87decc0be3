"""The one place metrics fan out to the trackers `report_to` names (`teamrl.config.report_to`).

Backends are imported only when a run opens them, so a config naming none of them needs none of
their packages.
"""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any, Mapping

from teamrl.config.report_to import BACKENDS
from teamrl.training.trackers.base import Tracker, TrackerRun

RECORD = "trackers.json"
"""File in the run directory: each opened tracker's record (ids, folders), read back on resume."""


class Trackers:
    """The open trackers of one run: every metrics row goes to each of them."""

    def __init__(self, opened: dict[str, Tracker]) -> None:
        self.opened = opened

    def log(self, step: int, metrics: Mapping[str, float | None]) -> None:
        """Send the finite values of one row to every tracker (metrics.jsonl keeps the rest as null)."""
        finite = {
            k: float(v)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        }
        if finite:
            for tracker in self.opened.values():
                tracker.log(step, finite)

    def close(self, failed: bool) -> None:
        """Close every tracker, even when one of them fails to; then raise the first such error."""
        errors = []
        for tracker in self.opened.values():
            try:
                tracker.close(failed)
            except Exception as err:  # the others must still be flushed
                errors.append(err)
        self.opened = {}
        if errors:
            raise errors[0]


def open_trackers(
    names: list[str], path: Path, project: str, config: dict[str, Any], resume_from: int | None = None
) -> Trackers:
    """Open the named trackers for the run in `path` and save their records to trackers.json.

    resume_from: None for a new run; for a resumed one the first step it logs, and each tracker gets
    back the record the stopped run saved, to continue the same tracker run where the backend can.
    """
    record_file = path / RECORD
    previous = json.loads(record_file.read_text()) if resume_from is not None and record_file.exists() else {}
    opened: dict[str, Tracker] = {}
    try:
        for name in names:
            module = importlib.import_module(BACKENDS[name].module)
            run = TrackerRun(path, path.name, project, config, previous.get(name), resume_from)
            opened[name] = module.open_run(run)
    except BaseException:
        Trackers(opened).close(failed=True)
        raise
    # Records of trackers this run does not open are kept, so a later resume that names them again continues them.
    record_file.write_text(json.dumps({**previous, **{n: t.record() for n, t in opened.items()}}, indent=1))
    return Trackers(opened)
