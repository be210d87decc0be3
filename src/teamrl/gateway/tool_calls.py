"""Tool calls in the OpenAI wire format: the request's tools and tool choice, and the parsers that read
the calls a policy wrote out of its sampled text.

A parser only reads: it turns text into `tool_calls` for the response. The training record of the call
keeps the token ids that were sampled (`Call.generation`), never ids re-made from the parsed calls.

Parsers are registered by name (`hermes` first: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
blocks, as Qwen2.5/Qwen3 and Hermes models write them, and as the gateway's fallback prompt asks for).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from teamrl.gateway.openai_api import ApiError

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""OpenAI's rule for function names."""


@dataclass(frozen=True)
class ToolRequest:
    """What a request asks of tools: the functions offered and how the policy may use them."""

    functions: list[dict[str, Any]]  # [{"name", "description"?, "parameters"?}] as the client sent them
    choice: str = "auto"  # auto | none | required | function (one named function)
    named: str | None = None  # the function tool_choice names
    parallel: bool = True  # parallel_tool_calls: several calls in one answer allowed

    @property
    def rendered(self) -> list[dict[str, Any]]:
        """The functions shown to the policy: none for choice none, only the named one for a named choice."""
        if self.choice == "none":
            return []
        return [f for f in self.functions if self.named is None or f["name"] == self.named]

    @property
    def parsed(self) -> bool:
        """Whether the answer is read for calls (not with choice none: no tool was offered)."""
        return bool(self.rendered)

    def allowed(self) -> frozenset[str]:
        return frozenset(f["name"] for f in self.rendered)


def tool_request(body: dict[str, Any]) -> ToolRequest | None:
    """The request's tools and tool choice (None when it offers no tools); ApiError 400 naming what is wrong."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if not tools:
        if choice not in (None, "none", "auto"):
            raise ApiError(
                400,
                f"tool_choice={choice!r} needs `tools`: list the functions the model may call",
                code="invalid_tool_choice",
                param="tool_choice",
            )
        return None
    if not isinstance(tools, list):
        raise ApiError(
            400, 'tools must be a list of {"type": "function", "function": {...}}', param="tools", code="invalid_tools"
        )
    functions = [_function(i, tool) for i, tool in enumerate(tools)]
    names = [f["name"] for f in functions]
    if len(set(names)) != len(names):
        raise ApiError(400, f"tools: function names must be unique, got {names}", code="invalid_tools", param="tools")
    named = None
    if choice is None or choice in ("auto", "none", "required"):
        kind = choice or "auto"
    elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict):
        kind, named = "function", choice["function"].get("name")
        if named not in names:
            raise ApiError(
                400,
                f"tool_choice names {named!r}, which is not among the tools ({', '.join(names)})",
                code="invalid_tool_choice",
                param="tool_choice",
            )
    else:
        raise ApiError(
            400,
            f'tool_choice={choice!r}: use "auto", "none", "required" or '
            '{"type": "function", "function": {"name": ...}}',
            code="invalid_tool_choice",
            param="tool_choice",
        )
    parallel = body.get("parallel_tool_calls")
    return ToolRequest(functions, kind, named, True if parallel is None else bool(parallel))


def _function(i: int, tool: Any) -> dict[str, Any]:
    where = f"tools[{i}]"
    if not (isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("function"), dict)):
        raise ApiError(
            400,
            f'{where}: a tool is {{"type": "function", "function": {{"name", "description", '
            '"parameters"}}}; other tool types are not supported',
            code="invalid_tools",
            param=where,
        )
    function = tool["function"]
    name = function.get("name")
    if not (isinstance(name, str) and NAME.match(name)):
        raise ApiError(
            400, f"{where}.function.name={name!r}: 1-64 letters, digits, _ or -", code="invalid_tools", param=where
        )
    if not isinstance(function.get("parameters", {}), dict) or not isinstance(function.get("description", ""), str):
        raise ApiError(
            400,
            f"{where}.function: `parameters` must be a JSON Schema object and `description` text",
            code="invalid_tools",
            param=where,
        )
    if function.get("strict"):
        raise ApiError(
            400,
            f"{where}.function.strict=true is not supported: nothing holds the policy's arguments to "
            "the schema; leave `strict` out (calls are still checked to be JSON objects)",
            code="invalid_tools",
            param=where,
        )
    return {k: function[k] for k in ("name", "description", "parameters") if k in function}


# ---- the calls in a sampled answer -----------------------------------------------------------------------
@dataclass
class ParsedAnswer:
    """A sampled text read for tool calls."""

    content: str | None  # the text outside the call blocks (None when nothing else was written)
    calls: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "arguments": dict}]
    problem: str | None = None  # why the calls the text holds are malformed (then `calls` is empty)


Parser = Callable[[str], ParsedAnswer]
"""text -> ParsedAnswer: the calls written in it (their names and arguments not yet checked against the tools)."""

TOOL_CALL_PARSERS: dict[str, Parser] = {}


def register_tool_call_parser(name: str, parser: Parser) -> None:
    if name in TOOL_CALL_PARSERS:
        raise ValueError(f"a tool-call parser named {name!r} is already registered")
    TOOL_CALL_PARSERS[name] = parser


def tool_call_parser(name: str) -> Parser:
    """The registered parser `name`; a ValueError listing the registered ones otherwise."""
    if name not in TOOL_CALL_PARSERS:
        raise ValueError(f"unknown tool-call parser {name!r}; registered: {', '.join(sorted(TOOL_CALL_PARSERS))}")
    return TOOL_CALL_PARSERS[name]


HERMES_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def parse_hermes(text: str) -> ParsedAnswer:
    r"""`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks; the rest of the text is content.

    >>> parse_hermes('Let me look.\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>')
    ParsedAnswer(content='Let me look.', calls=[{'name': 'f', 'arguments': {'x': 1}}], problem=None)
    >>> parse_hermes('<tool_call>{"name": "f", "arguments": [1]}</tool_call>').problem
    'call 0: arguments must be a JSON object, got list'
    """
    blocks = HERMES_BLOCK.findall(text)
    rest = HERMES_BLOCK.sub("", text)
    if "<tool_call>" in rest or "</tool_call>" in rest:
        return ParsedAnswer(text, problem="a <tool_call> block is not closed (or not opened)")
    calls = []
    for i, block in enumerate(blocks):
        try:
            call = json.loads(block)
        except ValueError as err:
            return ParsedAnswer(text, problem=f"call {i}: not JSON ({err})")
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return ParsedAnswer(text, problem=f"call {i}: not an object with a string `name`")
        arguments = call.get("arguments", {})
        if not isinstance(arguments, dict):
            kind = type(arguments).__name__
            return ParsedAnswer(text, problem=f"call {i}: arguments must be a JSON object, got {kind}")
        calls.append({"name": call["name"], "arguments": arguments})
    content = rest.strip() if blocks else text
    return ParsedAnswer(content or None, calls)


register_tool_call_parser("hermes", parse_hermes)


@dataclass
class ToolAnswer:
    """The message and finish reason of an answer to a request with tools."""

    content: str | None
    tool_calls: list[dict[str, Any]]  # OpenAI tool_calls: [{"id", "type": "function", "function": {...}}]
    finish_reason: str
    outcome: str  # calls | text | malformed | missing_required: what the gateway counts


def read_answer(text: str, finished: bool, tools: ToolRequest, parser: Parser, seed: str) -> ToolAnswer:
    """The OpenAI message of a sampled `text`: its tool calls when it wrote valid ones, else the text itself.

    seed: what the call ids are derived from (the prompt and response): a replayed answer gets the ids its
    recorded run got, so a program that sends them back (a template may render them) replays the same prompt.

    An answer is returned as plain text (`finish_reason` stop, never a 500 or a made-up call) when its calls
    are malformed (bad JSON, arguments not an object, a function the request did not offer, several calls
    with parallel_tool_calls false) or when tool_choice required a call and it wrote none.
    """
    if not finished:
        return ToolAnswer(text, [], "length", "text")
    parsed = parser(text)
    problem = parsed.problem
    if problem is None:
        unknown = [c["name"] for c in parsed.calls if c["name"] not in tools.allowed()]
        if unknown:
            problem = f"calls {', '.join(unknown)}, not among the offered {', '.join(sorted(tools.allowed()))}"
        elif len(parsed.calls) > 1 and not tools.parallel:
            problem = f"{len(parsed.calls)} calls with parallel_tool_calls false"
    if problem is not None:
        return ToolAnswer(text, [], "stop", "malformed")
    if not parsed.calls:
        return ToolAnswer(text, [], "stop", "missing_required" if tools.choice in ("required", "function") else "text")
    calls = [
        {
            "id": "call_" + hashlib.sha256(f"{seed}/{i}".encode()).hexdigest()[:24],
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
        }
        for i, c in enumerate(parsed.calls)
    ]
    return ToolAnswer(parsed.content, calls, "tool_calls", "calls")
