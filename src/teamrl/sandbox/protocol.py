"""Length-prefixed JSON messages over raw file descriptors.

Used between the grader and its worker processes, and between a worker and its forked children.
JSON (not pickle) so that a message written by an untrusted process can never run code in the
process that reads it. Stdlib only: this module is also loaded inside the bare worker interpreter.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

_HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 256 * 1024 * 1024  # a request carries program text; anything bigger is a bug


class ProtocolError(RuntimeError):
    """The other side closed the channel, timed out, or sent something that is not a message."""


def encode_message(obj: Any) -> bytes:
    """Frame `obj` as 4-byte big-endian length + compact UTF-8 JSON."""
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode("utf-8")
    if len(body) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(body)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return _HEADER.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to a blocking fd."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def send_message(fd: int, obj: Any) -> None:
    """Write one framed message to `fd` (blocking)."""
    write_all(fd, encode_message(obj))


def _read_exact(fd: int, n: int, deadline: float | None, max_bytes: int) -> bytes:
    if n > max_bytes:
        raise ProtocolError(f"message of {n} bytes exceeds the limit of {max_bytes}")
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        if deadline is not None:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise ProtocolError("timed out waiting for a message")
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise ProtocolError("timed out waiting for a message")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise ProtocolError("channel closed by the other side")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv_message(fd: int, deadline: float | None = None, max_bytes: int = MAX_MESSAGE_BYTES) -> Any:
    """Read one framed message from `fd`; `deadline` is a time.monotonic() value or None (block).

    Raises ProtocolError on EOF, timeout, oversize, or undecodable JSON.
    """
    (length,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline, max_bytes))
    body = _read_exact(fd, length, deadline, max_bytes)
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"undecodable message: {exc}") from None
