"""`report_to`: the tracker names, the packages each needs, and the one place metrics fan out to them.

Backends are imported only when a run opens them, so a config naming none of them needs none of
their packages, and checking a config (`resolve_report_to`) imports nothing heavy.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from teamrl.config.checks import ConfigError
from teamrl.training.trackers.base import Tracker, TrackerRun

RECORD = "trackers.json"
"""File in the run directory: each opened tracker's record (ids, folders), read back on resume."""


@dataclass(frozen=True)
class Backend:
    """One tracker: what must be importable, how to install it, and the module that opens its runs."""

    modules: tuple[str, ...]
    extra: str
    """teamrl's pip extra that installs it."""
    packages: str
    """The same as plain pip requirements."""
    module: str
    """Module with `open_run(run: TrackerRun) -> Tracker`."""


BACKENDS: dict[str, Backend] = {
    "tensorboard": Backend(("tensorboard",), "tensorboard", "tensorboard",
                           "teamrl.training.trackers.tensorboard_backend"),
    "wandb": Backend(("wandb",), "wandb", "wandb", "teamrl.training.trackers.wandb_backend"),
    # The local sqlite store needs SQLAlchemy and Alembic; mlflow-skinny leaves them out, full mlflow has them.
    "mlflow": Backend(("mlflow", "sqlalchemy", "alembic"), "mlflow", "mlflow-skinny sqlalchemy alembic",
                      "teamrl.training.trackers.mlflow_backend"),
    "trackio": Backend(("trackio",), "trackio", "trackio", "teamrl.training.trackers.trackio_backend"),
}
KEYWORDS = ("auto", "all", "none")


def installed(name: str) -> bool:
    """Whether every package tracker `name` needs can be imported (checked without importing it)."""
    return all(importlib.util.find_spec(module) is not None for module in BACKENDS[name].modules)


def resolve_report_to(value: Any) -> list[str]:
    """The trackers `report_to` names, in order; a ConfigError for a bad value or a missing package.

    auto: tensorboard when it is installed (teamrl's behaviour before report_to existed); all: every
    installed tracker; none or []: metrics.jsonl only; a name or a list of names: exactly those.
    """
    valid = ", ".join(BACKENDS)
    if value == "auto":
        return [name for name in ("tensorboard",) if installed(name)]
    if value == "all":
        return [name for name in BACKENDS if installed(name)]
    if value == "none":
        return []
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"report_to = {value!r} is invalid: expected a list of tracker names ({valid}), "
                          "or one of auto, all, none")
    for name in names:
        if name not in BACKENDS:
            raise ConfigError(f"report_to: unknown tracker {name!r}; valid trackers: {valid} "
                              "(or report_to: auto, all or none)")
        if not installed(name):
            backend = BACKENDS[name]
            raise ConfigError(f"report_to names {name}, but its packages are not installed: "
                              f"pip install 'teamrl[{backend.extra}]' (or: pip install {backend.packages}), "
                              f"or remove {name} from report_to")
    if len(set(names)) != len(names):
        raise ConfigError(f"report_to = {value!r} names a tracker twice; list each once")
    return list(names)


class Trackers:
    """The open trackers of one run: every metrics row goes to each of them."""

    def __init__(self, opened: dict[str, Tracker]) -> None:
        self.opened = opened

    def log(self, step: int, metrics: Mapping[str, float | None]) -> None:
        """Send the finite values of one row to every tracker (metrics.jsonl keeps the rest as null)."""
        finite = {k: float(v) for k, v in metrics.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
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


def open_trackers(names: list[str], path: Path, project: str, config: dict[str, Any],
                  resume_from: int | None = None) -> Trackers:
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
