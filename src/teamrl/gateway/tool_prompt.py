"""A request's tools, tool calls and tool results put into a policy's prompt.

A chat template that supports tools (its source mentions `tools`: Qwen2.5, Qwen3, Llama 3.1, ...) renders
them itself: the messages keep their `tool_calls` (arguments as objects, as Hugging Face templates expect)
and the tools go to `apply_chat_template(tools=...)`.

A template without tool support (SmolLM2's ChatML, Gemma's, the tiny default's) or no template at all gets
the fallback: Hermes-style text, which is what the `hermes` parser reads back.
- the functions' JSON schemas in a `<tools>` block at the end of the system message (one is added first);
- an assistant message's calls as `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks after
  its content;
- tool results as `<tool_response>` blocks in a user message (consecutive results share one).
All of it is message content, so it is tokenized as plain text: a schema, an argument or a tool result
cannot forge a special token.
"""

from __future__ import annotations

import json
from typing import Any

from transformers import PreTrainedTokenizerBase

from teamrl.gateway.tool_calls import ToolRequest


def template_supports_tools(tokenizer: PreTrainedTokenizerBase, use_template: bool) -> bool:
    """Whether the policy's chat template renders tools itself (its source mentions `tools`)."""
    template = tokenizer.chat_template if use_template else None
    if isinstance(template, dict):  # named templates: Hugging Face picks "tool_use" when tools are given
        template = template.get("tool_use") or template.get("default")
    return isinstance(template, str) and "tools" in template


def fallback_tools_text(functions: list[dict[str, Any]], tools: ToolRequest) -> str:
    """The system text that offers `functions` to a policy whose template has no tool support."""
    listing = "\n".join(json.dumps({"type": "function", "function": f}, ensure_ascii=False) for f in functions)
    if tools.choice == "function":
        rule = f"You must call the function {tools.named}."
    elif tools.choice == "required":
        rule = "You must call at least one function."
    else:
        rule = "Call a function when it helps; otherwise answer directly."
    if not tools.parallel:
        rule += " Call at most one function per answer."
    return (
        "# Tools\n\nYou can call these functions (JSON schemas inside <tools></tools>):\n"
        f"<tools>\n{listing}\n</tools>\n\n{rule} To call one, write a JSON object with the function's name "
        "and arguments between <tool_call></tool_call> tags:\n"
        '<tool_call>\n{"name": "<function name>", "arguments": {<arguments as JSON>}}\n</tool_call>\n'
        "Each result comes back inside <tool_response></tool_response> tags."
    )


def call_block(call: dict[str, Any]) -> str:
    """An OpenAI tool call as the Hermes block a policy writes (arguments as an object when they parse)."""
    function = call["function"]
    return (
        "<tool_call>\n"
        + json.dumps({"name": function["name"], "arguments": _arguments(function["arguments"])}, ensure_ascii=False)
        + "\n</tool_call>"
    )


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text  # as sent: the policy sees what its program passed back


def prompt_messages(
    messages: list[dict[str, Any]], tools: ToolRequest | None, native: bool, system_prompt: str = ""
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """(messages, tools for the template) to encode: `native` keeps the structure for the template to
    render, otherwise the fallback text (module docstring). `system_prompt`: the policy's own, kept in
    front of the fallback's tool listing when the request has no system message."""
    functions = tools.rendered if tools is not None else []
    if native:
        kept = [
            dict(m, tool_calls=[_native_call(c) for c in m["tool_calls"]]) if m.get("tool_calls") else m
            for m in messages
        ]
        return kept, [{"type": "function", "function": f} for f in functions] or None
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "tool":
            block = f"<tool_response>\n{m['content']}\n</tool_response>"
            if out and out[-1].get("from_tools"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "from_tools": True})
        elif m.get("tool_calls"):
            blocks = "\n".join(call_block(c) for c in m["tool_calls"])
            out.append({"role": "assistant", "content": f"{m['content']}\n{blocks}" if m["content"] else blocks})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    out = [{"role": m["role"], "content": m["content"]} for m in out]
    if tools is not None and functions:
        listing = fallback_tools_text(functions, tools)
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{listing}" if out[0]["content"] else listing
        else:
            out.insert(0, {"role": "system", "content": f"{system_prompt}\n\n{listing}" if system_prompt else listing})
    return out, None


def _native_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call["function"]
    return {
        "id": call["id"],
        "type": "function",
        "function": {"name": function["name"], "arguments": _arguments(function["arguments"])},
    }
