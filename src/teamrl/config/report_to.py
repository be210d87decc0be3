"""`report_to`: the tracker names and the packages each needs, checked when a config loads.

Backends are imported only when a run opens them (`teamrl.training.trackers.registry.open_trackers`),
so a config naming none of them needs none of their packages, and checking a config
(`resolve_report_to`) imports nothing heavy.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from teamrl.config.checks import ConfigError


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
    "tensorboard": Backend(
        ("tensorboard",), "tensorboard", "tensorboard", "teamrl.training.trackers.tensorboard_backend"
    ),
    "wandb": Backend(("wandb",), "wandb", "wandb", "teamrl.training.trackers.wandb_backend"),
    # The local sqlite store needs SQLAlchemy and Alembic; mlflow-skinny leaves them out, full mlflow has them.
    "mlflow": Backend(
        ("mlflow", "sqlalchemy", "alembic"),
        "mlflow",
        "mlflow-skinny sqlalchemy alembic",
        "teamrl.training.trackers.mlflow_backend",
    ),
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
        raise ConfigError(
            f"report_to = {value!r} is invalid: expected a list of tracker names ({valid}), or one of auto, all, none"
        )
    for name in names:
        if name not in BACKENDS:
            raise ConfigError(
                f"report_to: unknown tracker {name!r}; valid trackers: {valid} (or report_to: auto, all or none)"
            )
        if not installed(name):
            backend = BACKENDS[name]
            raise ConfigError(
                f"report_to names {name}, but its packages are not installed: "
                f"pip install 'teamrl[{backend.extra}]' (or: pip install {backend.packages}), "
                f"or remove {name} from report_to"
            )
    if len(set(names)) != len(names):
        raise ConfigError(f"report_to = {value!r} names a tracker twice; list each once")
    return list(names)
