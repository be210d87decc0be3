"""Plain-data codec for values crossing between the test judge and the candidate program.

Only builtin data types survive the trip: None, bool, int, float, complex, str, bytes,
bytearray, list, tuple, dict, set, frozenset, and the builtin functions and types themselves
(`int`, `len`, ... sent by name and resolved to the receiver's own builtins). Anything else is sent as a *reference* (an opaque
handle the other side can pass back, call, or iterate through the program). Decoding builds
fresh builtin objects, so an object from the program can never bring its own `__eq__`,
`__bool__` or `__hash__` into the judge: comparisons in the tests always use builtin semantics.

JSON encoding: JSON null/true/false/numbers/strings/arrays stand for themselves (NaN and the
infinities use Python's JSON extension); every other value is an object {"$": tag, "v": ...}.
"""

from __future__ import annotations

import builtins
from typing import Any, Callable

MAX_DEPTH = 100  # deeper nesting is refused (and would overflow the C stack when decoding)

_TAG_TUPLE, _TAG_DICT, _TAG_SET, _TAG_FROZENSET = "t", "d", "s", "fs"
_TAG_BYTES, _TAG_BYTEARRAY, _TAG_COMPLEX = "b", "ba", "c"
TAG_REF, TAG_NAME, TAG_BUILTIN = "r", "n", "bi"
_BUILTINS = vars(builtins)


class ValueCodecError(ValueError):
    """A value that cannot be encoded, or data that is not a valid encoding."""


def _convert_foreign(value: Any) -> Any:
    """Turn subclasses and numpy values into builtin data, or return None if not possible.

    Runs on the program side only: whatever a subclass's overrides make of it, the judge
    receives a builtin value.
    """
    if isinstance(value, bool):
        return bool(value)
    base: type[Any]  # each entry converts `value` to exactly that builtin
    for base in (int, float, complex, str, bytes):
        if isinstance(value, base):
            return base(value)
    if isinstance(value, tuple):
        return tuple(value)
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, frozenset):
        return frozenset(value)
    if isinstance(value, set):
        return set(value)
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    return None


def encode(
    value: Any, to_ref: Callable[[Any], dict[str, Any]] | None = None, convert: bool = False, _depth: int = 0
) -> Any:
    """Encode `value` as JSON-able data.

    to_ref: called for values that are not plain data; returns their reference encoding. Without
        it such values raise ValueCodecError.
    convert: also accept subclasses / numpy values by converting them to builtin data first.
    """
    if _depth > MAX_DEPTH:
        raise ValueCodecError(f"value nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if value is None or kind is bool or kind is str or kind is int or kind is float:
        return value
    depth = _depth + 1
    if kind is list:
        return [encode(x, to_ref, convert, depth) for x in value]
    if kind is tuple:
        return {"$": _TAG_TUPLE, "v": [encode(x, to_ref, convert, depth) for x in value]}
    if kind is dict:
        return {
            "$": _TAG_DICT,
            "v": [[encode(k, to_ref, convert, depth), encode(v, to_ref, convert, depth)] for k, v in value.items()],
        }
    if kind is set or kind is frozenset:
        tag = _TAG_SET if kind is set else _TAG_FROZENSET
        return {"$": tag, "v": [encode(x, to_ref, convert, depth) for x in value]}
    if kind is bytes or kind is bytearray:
        return {"$": _TAG_BYTES if kind is bytes else _TAG_BYTEARRAY, "v": value.hex()}
    if kind is complex:
        return {"$": _TAG_COMPLEX, "v": [value.real, value.imag]}
    name = getattr(value, "__name__", None)
    if isinstance(name, str) and _BUILTINS.get(name) is value:
        return {"$": TAG_BUILTIN, "v": name}
    if convert:
        converted = _convert_foreign(value)
        if converted is not None:
            return encode(converted, to_ref, convert, depth)
    if to_ref is not None:
        return to_ref(value)
    raise ValueCodecError(f"cannot send a {kind.__name__} value to the program (only plain data)")


def decode(data: Any, from_ref: Callable[[dict[str, Any]], Any] | None = None, _depth: int = 0) -> Any:
    """Rebuild builtin values from `encode` output; references go through `from_ref`."""
    if _depth > MAX_DEPTH:
        raise ValueCodecError(f"value nested deeper than {MAX_DEPTH} levels")
    kind = type(data)
    if data is None or kind is bool or kind is str or kind is int or kind is float:
        return data
    depth = _depth + 1
    if kind is list:
        return [decode(x, from_ref, depth) for x in data]
    if kind is not dict or "$" not in data:
        raise ValueCodecError(f"malformed value encoding: {type(data).__name__}")
    tag, payload = data["$"], data.get("v")
    try:
        if tag == _TAG_TUPLE:
            return tuple(decode(x, from_ref, depth) for x in payload)
        if tag == _TAG_DICT:
            return {decode(k, from_ref, depth): decode(v, from_ref, depth) for k, v in payload}
        if tag == _TAG_SET:
            return {decode(x, from_ref, depth) for x in payload}
        if tag == _TAG_FROZENSET:
            return frozenset(decode(x, from_ref, depth) for x in payload)
        if tag == _TAG_BYTES:
            return bytes.fromhex(payload)
        if tag == _TAG_BYTEARRAY:
            return bytearray.fromhex(payload)
        if tag == _TAG_COMPLEX:
            real, imag = payload
            if type(real) not in (int, float) or type(imag) not in (int, float):
                raise ValueCodecError("malformed complex value")
            return complex(real, imag)
    except (TypeError, ValueError) as exc:  # e.g. an unhashable key, bad hex
        raise ValueCodecError(f"malformed {tag!r} value: {exc}") from None
    if tag == TAG_BUILTIN and isinstance(payload, str) and payload in _BUILTINS:
        return _BUILTINS[payload]
    if tag in (TAG_REF, TAG_NAME) and from_ref is not None:
        return from_ref(data)
    raise ValueCodecError(f"unknown value tag {tag!r}")
