"""Reading a chat request off the wire: its body, vetted before anything is sampled, and the client's
disconnect while its answer is being drawn."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable

from fastapi import Request
from pydantic import ValidationError

from teamrl.gateway.openai_api import ApiError, ChatRequest
from teamrl.gateway.parameters import MAX_STOP_CHARS, MAX_STOP_STRINGS, RefusedParameter, check_parameters
from teamrl.rollout.builtin_engine import Generation


async def read_chat_request(request: Request, limit: int) -> ChatRequest:
    """The body as a vetted ChatRequest; ApiError 413 past `limit` bytes (counted while reading, so an
    oversized body is never held whole), 415 for a body that is not JSON, 400/422 for a bad one."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and kind != "application/json" and not kind.endswith("+json"):
        raise ApiError(
            415,
            f"content-type {kind!r}: send the request as JSON (Content-Type: application/json)",
            code="unsupported_media_type",
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    try:
        raw = json.loads(b"".join(chunks))
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise ApiError(422, f"invalid request: the body is not JSON ({err})", code="invalid_request") from None
    if not isinstance(raw, dict):
        raise ApiError(
            422,
            f"invalid request: the body must be a JSON object, got {type(raw).__name__}",
            code="invalid_request",
        )
    try:
        check_parameters(raw)
    except RefusedParameter as err:
        raise ApiError(400, str(err), code=err.code, param=err.param) from None
    try:
        chat = ChatRequest.model_validate(raw, strict=True)  # "yes" is no boolean, "1" no number
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in err.errors())
        first = ".".join(map(str, err.errors()[0]["loc"])) or None
        raise ApiError(422, f"invalid request: {problems}", code="invalid_request", param=first) from None
    stops = chat.stop_strings()
    if len(stops) > MAX_STOP_STRINGS or any(len(s) > MAX_STOP_CHARS for s in stops):
        raise ApiError(
            400,
            f"stop: at most {MAX_STOP_STRINGS} strings of at most {MAX_STOP_CHARS} characters, "
            f"got {len(stops)} of up to {max(map(len, stops))}",
            code="invalid_stop",
            param="stop",
        )
    return chat


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


async def unless_disconnected(request: Request, work: Awaitable[Generation]) -> Generation:
    """`work`'s result, or ClientGone (and `work` cancelled) as soon as the client disconnects."""

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":  # the body is read: only this is left
            pass

    task, watcher = asyncio.ensure_future(work), asyncio.ensure_future(disconnected())
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if watcher in done:
        task.cancel()
        raise ClientGone
    return task.result()


def _too_large(size: int, limit: int) -> ApiError:
    return ApiError(
        413,
        f"the request body has {size} bytes or more, over this gateway's limit of {limit}",
        code="request_too_large",
    )
