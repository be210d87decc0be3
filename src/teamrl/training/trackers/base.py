"""What every experiment tracker implements, and what it is told when a run starts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class TrackerRun:
    """The training run a tracker records: where it lives, what it is called, how it was configured.

    previous and resume_from are set for a resumed run only: the stopped run's record (what its tracker
    returned from `record`, e.g. a W&B run id) and the first step the resumed run logs (the checkpoint's
    step + 1, or 0 for a run restarted from its beginning).
    """

    path: Path
    """The run directory; a tracker keeps its local files in a folder of its own name under it."""
    name: str
    """The run directory's name, used as the tracker run's display name."""
    project: str
    """The tracker project (W&B and trackio project, MLflow experiment)."""
    config: dict[str, Any]
    """The resolved config, nested as in config.yaml."""
    previous: dict[str, Any] | None = None
    resume_from: int | None = None
    params: dict[str, str] = field(init=False)
    """The config flattened to dotted keys with string values (`train.steps` -> '150')."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", flatten_params(self.config))

    @property
    def resumed(self) -> bool:
        return self.resume_from is not None


class Tracker(Protocol):
    """One tracker's run, open from the training run's start until its end (also when a step fails)."""

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record finite scalar metrics (slash-namespaced names, e.g. `role/tool/reward`) at `step`."""

    def record(self) -> dict[str, Any]:
        """JSON-safe ids and locations, saved in trackers.json; a resumed run gets them back as `previous`."""

    def close(self, failed: bool) -> None:
        """Flush and finish the tracker run; failed: the training run stopped before its end."""


def flatten_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config -> {dotted key: string value}; lists and empty mappings become JSON.

    >>> flatten_params({"seed": 0, "train": {"steps": 3, "resume": ""}, "roles": {}, "lora": None})
    {'seed': '0', 'train.steps': '3', 'train.resume': '', 'roles': '{}', 'lora': 'None'}
    """
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) and value:
            out.update(flatten_params(value, f"{prefix}{key}."))
        elif isinstance(value, (list, tuple, Mapping)):
            out[prefix + key] = json.dumps(value, default=str)
        else:
            out[prefix + key] = str(value)
    return out
