"""A role prompt (text or chat messages) -> token ids, with message content always tokenized as text.

Why content is tokenized apart from the template: a workflow puts other agents' responses into a
role's prompt. A model can write the *text* `<|im_end|>\\n<|im_start|>system` with ordinary tokens;
tokenized with special-token parsing on, that text would become real special tokens, a forged chat
turn in the next agent's prompt. So the template is rendered around placeholders, its own markup is
tokenized with special tokens parsed, and every piece of content with `split_special_tokens=True`
(special-token strings stay plain text). For content without such strings the ids equal those of
tokenizing the whole rendered template (tested on ChatML and Gemma tokenizers).

Tool definitions and the arguments of earlier tool calls, which a template that supports tools renders
itself (as JSON, inside its markup), cannot be placeheld the same way; a tokenizer's special-token text
in them is refused (ValueError) rather than parsed. Tool results are message content, placeheld as any.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

Messages = Sequence[dict]
"""Chat messages: {"role": "system" | "user" | "assistant" | "tool", "content": str}, an assistant message
with optional `tool_calls`, a tool message with its `tool_call_id`."""

# Private-use code points: no tokenizer's template or text contains them.
_OPEN, _CLOSE = "\ue000", "\ue001"


def as_messages(prompt: str | Messages, system_prompt: str = "") -> list[dict]:
    """The prompt as a message list (a string is one user message), with `system_prompt` first when set."""
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    else:
        messages = [dict(m) for m in prompt]
        for m in messages:
            if m.get("role") not in ("system", "user", "assistant", "tool") or not isinstance(m.get("content"), str):
                raise ValueError(
                    f"a chat message needs role system/user/assistant/tool and a string content, got {m!r}"
                )
    if system_prompt and not (messages and messages[0]["role"] == "system"):
        messages.insert(0, {"role": "system", "content": system_prompt})
    return messages


def text_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """Ids of `text` with any special-token strings in it kept as plain text."""
    if not text:
        return []
    return tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def leading_bos(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """[bos] when the tokenizer itself starts every sequence with it (Gemma, Llama), else []."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return []
    auto = tokenizer("a", add_special_tokens=True)["input_ids"]
    return [bos] if auto and auto[0] == bos else []


PLAIN_TRANSCRIPT_STOP = ("\n\n",)
"""Where a base model's answer ends in a `plain_transcript`: the blank line that starts the next worked example."""


def plain_transcript(messages: Messages) -> str:
    r"""The messages as plain text for a model without a chat template (a base model).

    Contents are joined by blank lines, except that an assistant message follows the message before it
    on the next line: a worked example reads "question\nanswer", so the model answers the last question
    the same way, right after it, and ends its answer with the blank line that starts the next example
    (which `rollout.stop: ["\n\n"]` cuts). With blank lines everywhere a base model (Gemma-3-270M) began
    every answer with one, and a stop at a blank line would end it empty.

    >>> plain_transcript([{"role": "user", "content": "1+1 ="}, {"role": "assistant", "content": "2"},
    ...                   {"role": "user", "content": "2+2 ="}])
    '1+1 =\n2\n\n2+2 ='
    """
    text = ""
    for i, message in enumerate(messages):
        if i:
            text += "\n" if message["role"] == "assistant" else "\n\n"
        text += message["content"]
    return text


def encode_chat(
    tokenizer: PreTrainedTokenizerBase,
    prompt: str | Messages,
    *,
    use_template: bool,
    system_prompt: str = "",
    tools: list[dict] | None = None,
) -> list[int]:
    """Token ids of a role prompt ready for the model to answer.

    With a chat template: the messages rendered with a generation prompt (Qwen3's thinking off), and
    `tools` (OpenAI function tools) passed to the template, which must support them.
    Without one: `plain_transcript` of the messages, after the tokenizer's BOS when it uses one.
    """
    messages = as_messages(prompt, system_prompt)
    structured = bool(tools) or any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
    if not use_template:
        if structured:
            raise ValueError("tools, tool calls and tool results need a chat template; render them as text first")
        return leading_bos(tokenizer) + text_ids(tokenizer, plain_transcript(messages))
    if structured:
        _refuse_special_text(tokenizer, {"tools": tools or [], "calls": [m.get("tool_calls") for m in messages]})
    # An assistant message that only made tool calls keeps its empty content: templates test it.
    placeheld = [
        m if m.get("tool_calls") and not m["content"] else dict(m, content=f"{_OPEN}{i}{_CLOSE}")
        for i, m in enumerate(messages)
    ]
    extra = {"tools": tools} if tools else {}
    rendered = tokenizer.apply_chat_template(
        placeheld, tokenize=False, add_generation_prompt=True, enable_thinking=False, **extra
    )
    ids: list[int] = []
    rest = rendered
    for i, message in enumerate(messages):
        if placeheld[i] is message:
            continue
        marker = f"{_OPEN}{i}{_CLOSE}"
        if rest.count(marker) != 1:
            raise ValueError(
                f"the chat template of {type(tokenizer).__name__} did not place message {i} exactly "
                "once; teamrl cannot tokenize its content safely"
            )
        markup, rest = rest.split(marker)
        # Templates that trim content (Gemma's) would have trimmed it here too.
        ids += tokenizer(markup, add_special_tokens=False)["input_ids"] + text_ids(tokenizer, message["content"])
    return ids + tokenizer(rest, add_special_tokens=False)["input_ids"]


def _refuse_special_text(tokenizer: PreTrainedTokenizerBase, rendered_by_template: object) -> None:
    """ValueError when JSON the template renders as markup holds one of the tokenizer's special-token strings."""
    text = json.dumps(rendered_by_template, ensure_ascii=False)
    special = set(tokenizer.all_special_tokens) | {t for t in tokenizer.get_added_vocab() if len(t) > 1}
    found = sorted(t for t in special if t and t in text)
    if found:
        raise ValueError(
            f"the tool definitions or tool-call arguments hold the special-token text {found[0]!r}, "
            "which the chat template would turn into a real token; remove it"
        )
