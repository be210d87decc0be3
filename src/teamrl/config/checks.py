"""The configuration error and the one-line check every section uses."""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A configuration value is missing, unknown or invalid."""


def require(ok: bool, key: str, value: Any, expected: str) -> None:
    if not ok:
        raise ConfigError(f"{key} = {value!r} is invalid: expected {expected}")
