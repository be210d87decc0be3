"""A run configuration from any source the Python API accepts: a YAML file, a packaged config's name, a mapping
of settings or a RunConfig, with `key.sub=value` overrides and section settings merged in."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teamrl.config.run import RunConfig, config_from_mapping, config_to_dict
from teamrl.config.run import load_config as _load_file

PACKAGED_CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def load_config_from(
    source: str | Path | Mapping[str, Any] | RunConfig | None = None, overrides: Sequence[str] = (), **settings: Any
) -> RunConfig:
    """A validated run configuration.

    source: a YAML file, the name of a packaged config (`"plan_path_team"`, see `teamrl/configs/`), a
    mapping of settings, a RunConfig (copied), or None for the defaults.
    overrides: `key.sub=value` strings, as on the command line.
    settings: top-level keys merged into the source, a section's mapping merged key by key:
    `load_config("plan_path_team", train={"steps": 5}, seed=1)`.
    Raises ConfigError with what is wrong and how to fix it.
    """
    if isinstance(source, RunConfig):
        source = config_to_dict(source)
    if isinstance(source, Mapping):
        data = copy.deepcopy(dict(source))
    elif source is None:
        data = {}
    else:
        path = Path(source)
        packaged = PACKAGED_CONFIGS / f"{source}.yaml"
        if not path.exists() and path.suffix == "" and packaged.is_file():
            path = packaged
        if not settings:
            return _load_file(path, list(overrides))
        data = _read_mapping(path)
    _merge(data, settings)
    return config_from_mapping(data, list(overrides))


def _read_mapping(path: Path) -> dict[str, Any]:
    """The settings in a YAML file, read and validated as `teamrl train` reads them."""
    return config_to_dict(_load_file(path, []))


def _merge(data: dict[str, Any], settings: Mapping[str, Any]) -> None:
    """Merge `settings` into `data`: mappings key by key (recursively), other values replaced."""
    for key, value in settings.items():
        if isinstance(value, Mapping) and isinstance(data.get(key), dict):
            _merge(data[key], value)
        else:
            data[key] = copy.deepcopy(value)
