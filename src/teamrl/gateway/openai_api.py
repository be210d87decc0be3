"""The OpenAI Chat Completions wire format: request validation, response bodies, stream chunks, errors.

Only what a team of chat agents needs: text messages (with tool calls and tool results) in, one choice
out (`n` must be 1), with or without streaming, with the sampled tokens' log-probs if asked. Which request
parameters are honoured, refused or accepted as no-ops is `teamrl.gateway.parameters.PARAMETERS`; images
and the legacy `function_call` are refused with a 400 that says so, never silently dropped: a program that
relies on them would otherwise train on prompts it did not send.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ApiError(Exception):
    """An error answered as OpenAI does: HTTP `status` with {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = status, message, kind, code, param

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.kind, self.code, self.param)


def error_body(message: str, kind: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    """The OpenAI error envelope."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class TextPart(BaseModel):
    """One part of a list-valued message content; only text parts are accepted."""

    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None


class ChatRequest(BaseModel):
    """The fields of POST /v1/chat/completions that teamrl reads (`parameters.check_parameters` has vetted
    the others before)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    model: str = ""
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    n: int = 1
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    stop: str | list[str] | None = None
    logprobs: bool | None = None

    def token_cap(self) -> int | None:
        """The response-length limit the caller asked for (max_completion_tokens wins, as in OpenAI)."""
        return self.max_completion_tokens or self.max_tokens

    def stop_strings(self) -> tuple[str, ...]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return tuple(s for s in stops if s)


def plain_messages(request: ChatRequest, max_chars: int) -> list[dict[str, Any]]:
    """The request's messages as teamrl chat messages: {"role", "content"} with text content, plus
    `tool_calls` on an assistant message that made calls and `tool_call_id` on a tool result.

    `developer` is the newer name of `system`; a null content is empty text. Raises ApiError (400) for what
    teamrl cannot render faithfully: legacy `function_call` messages, malformed tool calls, non-text parts,
    or more than `max_chars` characters.
    """
    messages, total = [], 0
    for i, message in enumerate(request.messages):
        extra = message.model_extra or {}
        if extra.get("function_call"):
            raise ApiError(
                400,
                f"messages[{i}]: `function_call` is the legacy form; send `tool_calls`",
                code="unsupported_message",
                param=f"messages[{i}]",
            )
        if isinstance(message.content, list):
            bad = [p.type for p in message.content if p.type != "text" or p.text is None]
            if bad:
                raise ApiError(
                    400,
                    f"messages[{i}]: content parts of type {', '.join(bad)} are not supported; send text",
                    code="unsupported_content",
                    param=f"messages[{i}].content",
                )
            content = "".join(p.text or "" for p in message.content)
        else:
            content = message.content or ""
        role = "system" if message.role == "developer" else message.role
        entry: dict[str, Any] = {"role": role, "content": content}
        if extra.get("tool_calls"):
            if role != "assistant":
                raise ApiError(
                    400,
                    f"messages[{i}]: only assistant messages carry tool_calls",
                    code="invalid_tool_calls",
                    param=f"messages[{i}].tool_calls",
                )
            entry["tool_calls"] = _message_tool_calls(i, extra["tool_calls"])
            total += sum(len(c["function"]["arguments"]) for c in entry["tool_calls"])
        if role == "tool":
            call_id = extra.get("tool_call_id")
            if not isinstance(call_id, str):
                raise ApiError(
                    400,
                    f"messages[{i}]: a tool message needs the `tool_call_id` of the call it answers",
                    code="invalid_tool_message",
                    param=f"messages[{i}]",
                )
            entry["tool_call_id"] = call_id
        total += len(content)
        messages.append(entry)
    if total > max_chars:
        raise ApiError(
            400,
            f"the messages hold {total} characters, over this gateway's limit of {max_chars}",
            code="context_length_exceeded",
            param="messages",
        )
    return messages


def _message_tool_calls(i: int, calls: Any) -> list[dict[str, Any]]:
    """An assistant message's tool_calls, checked: [{"id", "type": "function", "function": {"name", "arguments"}}]."""
    where = f"messages[{i}].tool_calls"
    shape = '[{"id": ..., "type": "function", "function": {"name": ..., "arguments": "<a JSON string>"}}]'
    if not isinstance(calls, list):
        raise ApiError(400, f"{where}: expected {shape}", code="invalid_tool_calls", param=where)
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(function, dict)
            and isinstance(function.get("name"), str)
            and isinstance(function.get("arguments", ""), str)
            and call.get("type", "function") == "function"
        ):
            raise ApiError(400, f"{where}: expected {shape}", code="invalid_tool_calls", param=where)
        out.append(
            {
                "id": str(call.get("id", "")),
                "type": "function",
                "function": {"name": function["name"], "arguments": function.get("arguments", "")},
            }
        )
    return out


def token_logprobs(tokens: list[str], logprobs: list[float]) -> dict[str, Any]:
    """A choice's `logprobs` object: each sampled token's text and log-prob (no alternatives)."""
    return {
        "content": [
            {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
            for t, lp in zip(tokens, logprobs, strict=True)
        ],
        "refusal": None,
    }


@dataclass
class Answer:
    """What one choice says: its text (None when it only calls tools), tool calls and finish reason."""

    content: str | None
    finish_reason: str  # stop | length | tool_calls
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"id", "type": "function", "function"}]

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


def completion_body(
    agent: str, answer: Answer, prompt_tokens: int, completion_tokens: int, logprobs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A non-streamed chat.completion object (`logprobs`: a `token_logprobs` object, when asked)."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": agent,
        "choices": [
            {"index": 0, "message": answer.message(), "logprobs": logprobs, "finish_reason": answer.finish_reason}
        ],
        "usage": usage(prompt_tokens, completion_tokens),
    }


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


class ChunkWriter:
    """The server-sent events of one streamed choice, in the OpenAI chunk format (one id and time for all)."""

    def __init__(self, agent: str) -> None:
        self.agent, self.ident, self.created = agent, f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

    def chunk(self, choices: list[dict[str, Any]], **extra: Any) -> str:
        body = {
            "id": self.ident,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.agent,
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n"

    def role(self) -> str:
        return self.chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])

    def content(self, text: str, logprobs: dict[str, Any] | None = None) -> str:
        return self.chunk([{"index": 0, "delta": {"content": text}, "logprobs": logprobs, "finish_reason": None}])

    def ending(
        self,
        answer: Answer,
        prompt_tokens: int,
        completion_tokens: int,
        include_usage: bool,
        logprobs: dict[str, Any] | None = None,
        rest: str | None = None,
    ) -> list[str]:
        """The events after the streamed text: the rest of the content (`rest`, default the whole content),
        tool calls, finish reason, [usage], [DONE]. Each tool call comes in one chunk (`delta.tool_calls[i]`
        with its `index`, the arguments whole)."""
        if rest is None:
            rest = answer.content or ""
        events = [self.content(rest, logprobs)] if rest or logprobs is not None else []
        for i, call in enumerate(answer.tool_calls):
            events.append(
                self.chunk([{"index": 0, "delta": {"tool_calls": [{"index": i, **call}]}, "finish_reason": None}])
            )
        events.append(self.chunk([{"index": 0, "delta": {}, "finish_reason": answer.finish_reason}]))
        if include_usage:
            events.append(self.chunk([], usage=usage(prompt_tokens, completion_tokens)))
        events.append("data: [DONE]\n\n")
        return events

    def error(self, error: ApiError) -> list[str]:
        """An error after the stream began (the status is sent already): an event the openai client raises."""
        return [f"data: {json.dumps(error.body())}\n\n", "data: [DONE]\n\n"]


def stream_events(
    agent: str,
    answer: Answer,
    prompt_tokens: int,
    completion_tokens: int,
    include_usage: bool,
    logprobs: dict[str, Any] | None = None,
) -> list[str]:
    """The server-sent events of an answer streamed whole: role, content, tool calls, finish reason, [usage],
    [DONE]. For answers known before the first event (replayed, scripted, or buffered because the request
    offered tools); clients that join the deltas see the same message as without streaming."""
    writer = ChunkWriter(agent)
    return [writer.role(), *writer.ending(answer, prompt_tokens, completion_tokens, include_usage, logprobs)]


def models_body(agents: list[str]) -> dict[str, Any]:
    """GET /v1/models: one model per agent name."""
    return {
        "object": "list",
        "data": [{"id": a, "object": "model", "created": 0, "owned_by": "teamrl"} for a in agents],
    }
