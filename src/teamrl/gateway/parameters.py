"""Every OpenAI Chat Completions request parameter and what the gateway does with it: one table.

Each parameter is honoured, refused with a 400 that names it, or accepted as a no-op for a stated
reason; a parameter the table does not know is refused too (as OpenAI refuses unrecognised ones).
Silently ignoring one would let a program train on answers to a request it did not make.
`docs/howto/gateway.md` prints this table; a test checks the two agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HONOURED, REFUSED, NO_OP = "honoured", "refused", "accepted-no-op"

MAX_STOP_STRINGS = 4
"""A request's `stop` holds at most this many strings (OpenAI's own limit)."""
MAX_STOP_CHARS = 128
"""...of at most this many characters each: every decode step re-reads that many tokens per candidate row."""
MIN_TEMPERATURE = 1e-4
"""A request temperature in (0, MIN_TEMPERATURE) samples greedily (as 0): the distribution is then the
argmax for any real logit gap, and float32 logits divided by much smaller values overflow."""
MIN_TOP_P = 1e-4
"""Likewise a top_p in (0, MIN_TOP_P): its limit is the argmax, and float32 rounds 1e-300 to an empty nucleus."""


@dataclass(frozen=True)
class Parameter:
    status: str  # HONOURED | REFUSED | NO_OP
    note: str  # what the gateway does with it, or why it refuses / ignores it
    accepts: Callable[[Any], bool] | None = None
    """For honoured and refused parameters: the values taken (others are a 400 naming the parameter);
    None: any value its type allows. A refused parameter still takes the value that asks for nothing."""


def _is(*values: Any) -> Callable[[Any], bool]:
    return lambda value: any(value == v and type(value) is type(v) for v in values)  # 0 is not False


def _zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


PARAMETERS: dict[str, Parameter] = {
    "model": Parameter(HONOURED, "names the agent (or the `X-Teamrl-Agent` header); an unknown one is a 404"),
    "messages": Parameter(
        HONOURED,
        "system, developer (as system), user, assistant (with `tool_calls`) and tool "
        "messages, text only; non-text parts and legacy `function_call` are refused",
    ),
    "max_tokens": Parameter(HONOURED, "capped by the agent's `rollout.max_new_tokens`"),
    "max_completion_tokens": Parameter(HONOURED, "as `max_tokens` (wins over it, as in OpenAI)"),
    "stop": Parameter(
        HONOURED,
        f"up to {MAX_STOP_STRINGS} strings of at most {MAX_STOP_CHARS} characters; the answer ends before the "
        "first one, as in OpenAI (the trained record keeps it: it was sampled)",
    ),
    "stream": Parameter(
        HONOURED,
        "OpenAI chunks; the text as the batched decode draws it (with `tools`, or on another engine than the "
        "built-in one: whole at the end), each tool call in one `delta.tool_calls` chunk",
    ),
    "stream_options": Parameter(
        HONOURED,
        "`include_usage` (true or false; no other key)",
        lambda v: isinstance(v, dict) and set(v) <= {"include_usage"} and all(isinstance(x, bool) for x in v.values()),
    ),
    "n": Parameter(HONOURED, "1 only: send n requests for n answers", _is(1)),
    "temperature": Parameter(
        HONOURED,
        "under `teamrl serve` (below 1e-4: greedy); in training the config's "
        "sampling is used, the distribution the update trains",
    ),
    "top_p": Parameter(
        HONOURED, "under `teamrl serve` (below 1e-4: greedy); in training the config's, as `temperature`"
    ),
    "logprobs": Parameter(HONOURED, "the sampled tokens' log-probs under the sampling temperature"),
    "top_logprobs": Parameter(REFUSED, "0 only: the engine keeps the sampled token's log-prob, no alternatives", _zero),
    "response_format": Parameter(
        REFUSED, '`{"type": "text"}` only: nothing would hold the policy to a JSON format', _is({"type": "text"})
    ),
    "seed": Parameter(
        REFUSED, "requests are sampled in shared batches from one generator, so one request's seed cannot fix its draws"
    ),
    "logit_bias": Parameter(REFUSED, "`{}` only: not applied by the engines", _is({})),
    "frequency_penalty": Parameter(REFUSED, "0 only: not applied by the engines", _zero),
    "presence_penalty": Parameter(REFUSED, "0 only: not applied by the engines", _zero),
    "tools": Parameter(
        HONOURED,
        "function tools, rendered by the policy's chat template or the Hermes-style "
        "fallback; calls read by the agent's tool-call parser",
        lambda v: isinstance(v, list),
    ),
    "tool_choice": Parameter(
        HONOURED,
        "`auto`, `none` (tools not shown, answer not parsed), `required` or a named "
        "function (only it shown); no call written: the text, finish `stop`",
    ),
    "functions": Parameter(REFUSED, "the legacy form: send `tools`", _is([])),
    "function_call": Parameter(REFUSED, "the legacy form: send `tool_choice`", _is("none")),
    "parallel_tool_calls": Parameter(
        HONOURED,
        "`false`: an answer with several calls is returned as text "
        "(counted malformed); the fallback prompt asks for one",
        lambda v: isinstance(v, bool),
    ),
    "modalities": Parameter(REFUSED, '`["text"]` only', _is(["text"])),
    "audio": Parameter(REFUSED, "text only"),
    "prediction": Parameter(REFUSED, "predicted outputs are not built"),
    "reasoning_effort": Parameter(REFUSED, "no reasoning budget to set: the policy answers as trained"),
    "verbosity": Parameter(REFUSED, "no length control besides `max_tokens`"),
    "web_search_options": Parameter(REFUSED, "no web search"),
    "store": Parameter(REFUSED, "`false` only: nothing is stored for later retrieval", _is(False)),
    "metadata": Parameter(NO_OP, "goes with `store`; nothing is stored"),
    "user": Parameter(NO_OP, "an end-user id for abuse monitoring; no monitoring here"),
    "safety_identifier": Parameter(NO_OP, "as `user`"),
    "prompt_cache_key": Parameter(NO_OP, "a caching hint; each request is sampled afresh"),
    "service_tier": Parameter(NO_OP, "one tier"),
}


class RefusedParameter(ValueError):
    """A request parameter the gateway does not take; `param` names it."""

    def __init__(self, param: str, message: str, code: str) -> None:
        super().__init__(message)
        self.param, self.code = param, code


def check_parameters(body: dict[str, Any]) -> None:
    """RefusedParameter for the first parameter of `body` that is unknown, refused, or given a value its
    entry does not take. A null value counts as not given (as OpenAI reads it)."""
    for name, value in body.items():
        entry = PARAMETERS.get(name)
        if entry is None:
            raise RefusedParameter(
                name,
                f"unrecognized request parameter {name!r}: the teamrl gateway takes {', '.join(PARAMETERS)}",
                "unknown_parameter",
            )
        if value is None or entry.status == NO_OP:
            continue
        if entry.status == REFUSED and entry.accepts is None:
            raise RefusedParameter(
                name, f"{name} is not supported by the teamrl gateway: {entry.note}", "unsupported_parameter"
            )
        if entry.accepts is not None and not entry.accepts(value):
            raise RefusedParameter(
                name,
                f"{name}={_short(value)} is not supported by the teamrl gateway: {entry.note}",
                "unsupported_parameter",
            )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
