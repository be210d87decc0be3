"""Dicts (parsed YAML plus dotted overrides) -> nested dataclasses, with errors that name the key."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, get_type_hints

from teamrl.config.checks import ConfigError

MAX_INT = 2**63 - 1  # what an int64 holds: torch, numpy and the C code under them take no more
MAX_DEPTH = 32  # no setting nests deeper than a few levels (policies.NAME.lora.target_modules)
MAX_VALUES = 100_000  # a config is a few hundred values; YAML aliases can multiply them (a "billion laughs")


def build_dataclass(cls: type, data: dict[str, Any], where: str) -> Any:
    """Instantiate dataclass `cls` from a dict, recursing into nested dataclasses."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where.rstrip('.') or 'config'} must be a mapping, got {type(data).__name__}")
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(where + k for k in unknown)}; valid keys under "
            f"{where or 'the top level'}: {', '.join(sorted(names))}"
        )
    kwargs = {}
    for name, value in data.items():
        hint = optional_dataclass(hints[name], value)
        if hint is dict:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}{name} must be a mapping, got {type(value).__name__}")
            factory = next(f for f in dataclasses.fields(cls) if f.name == name).default_factory
            if factory is dataclasses.MISSING:
                raise TypeError(
                    f"{cls.__name__}.{name}: a dict field needs default_factory=dict (or a factory of its defaults)"
                )
            default = factory()
            value = {**default, **value}  # e.g. `task.size=5` keeps the default task name
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            kwargs[name] = build_dataclass(hint, value or {}, f"{where}{name}.")
        else:
            kwargs[name] = coerce(value, hint, where + name)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as err:
        if isinstance(err, ConfigError):  # a field check of `cls`: name the field's full key
            raise ConfigError(f"{where}{err}") from err
        raise ConfigError(f"{where.rstrip('.') or 'config'}: {err}") from err


def optional_dataclass(hint: Any, value: Any) -> Any:
    """`X | None` with X a dataclass: X for a mapping, NoneType for None; other hints unchanged."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(args) == 1 and type(None) in typing.get_args(hint) and dataclasses.is_dataclass(args[0]):
        return type(None) if value is None else args[0]
    return hint


def check_values(data: Any) -> None:
    """Refuse, before anything is built, what no setting can hold: integers beyond 64 bits, NaN or
    infinite floats, nesting deeper than MAX_DEPTH, more than MAX_VALUES values."""
    stack, seen = [(data, "", 0)], 0
    while stack:
        value, key, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(
                f"the config holds more than {MAX_VALUES} values (YAML aliases that repeat each "
                "other?); write each setting out once"
            )
        if depth > MAX_DEPTH:
            raise ConfigError(
                f"{key} nests more than {MAX_DEPTH} levels deep, and no setting nests that deep; check its brackets"
            )
        if isinstance(value, dict):
            stack.extend((item, f"{key}.{name}" if key else str(name), depth + 1) for name, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, f"{key}[{index}]", depth + 1) for index, item in enumerate(value))
        else:
            check_number(value, key)


def check_number(value: Any, key: str) -> None:
    """ConfigError when `value` is an integer beyond 64 bits or a float that is NaN or infinite."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        digits = int(value.bit_length() * math.log10(2)) + 1
        shown = str(value) if digits <= 40 else f"an integer of about {digits} digits"
        raise ConfigError(
            f"{key} = {shown} is too large: settings are 64-bit integers (at most {MAX_INT}); use a smaller value"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(
            f"{key} = {value!r} is invalid: expected a finite number (NaN and infinity are no "
            "setting's value); write a number, e.g. 0.001"
        )


def coerce(value: Any, hint: Any, key: str) -> Any:
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        check_number(value, key)
        return float(value)
    if hint is float and isinstance(value, str):
        try:  # YAML 1.1 reads "1e-3" (no dot) as a string
            number = float(value)
        except ValueError:
            pass
        else:
            check_number(number, key)  # "inf", "nan" and "1e999" are strings YAML leaves to float()
            return number
    check_number(value, key)
    expected = hint if isinstance(hint, type) else _literal_type(hint)
    if expected is not None and not isinstance(value, expected):
        raise ConfigError(f"{key} = {value!r} must be of type {expected.__name__}")
    if expected is int and isinstance(value, bool):
        raise ConfigError(f"{key} = {value!r} must be an integer, not a boolean")
    return value


def _literal_type(hint: Any) -> type | None:
    """The type of a `Literal[...]` option's values (str for a word option), so that a value of another type
    is named as such; the section's own check then names the words. None for any other hint."""
    if typing.get_origin(hint) is not typing.Literal:
        return None
    kinds = {type(word) for word in typing.get_args(hint)}
    return kinds.pop() if len(kinds) == 1 else None


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {dotted}: {part} is not a section")
    node[parts[-1]] = value
