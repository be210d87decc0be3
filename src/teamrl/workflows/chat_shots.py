"""Few-shot chat prompts: an instruction, worked examples as earlier turns, then the agent's question.

Why examples as turns: a 135M instruct model (SmolLM2) told "reply with only the formula" still answers
in a sentence ("The sum of x and y is x + y"), which the strict verifiers of the study tasks refuse,
and examples written inline in one message are copied label and all ("Operation: x-2*y"). Given the
examples as earlier user / assistant turns, it answers in the examples' bare form. A model without a
chat template reads the same messages joined by blank lines: the instruction, each example's question
and answer, and the question last, which ends with its cue (`Formula:`), as plain text should.

The examples must not be instances of the task (they would hand the answer over), and each role's
examples must carry only the kind of information that role sees.
"""

from __future__ import annotations

from collections.abc import Sequence

Example = tuple[str, str]
"""(a question as the agent sees it, the answer in the exact form asked for)."""


def few_shot(instruction: str, examples: Sequence[Example], question: str) -> list[dict[str, str]]:
    """Chat messages: the instruction with the first question, each example's answer as the assistant's
    turn, then the remaining examples and the agent's own `question` as user turns. An empty instruction:
    every question is a whole prompt of its own.

    >>> [m["role"] for m in few_shot("Add.", [("1+1 =", "2")], "2+2 =")]
    ['user', 'assistant', 'user']
    >>> few_shot("Add.", [], "2+2 =")[0]["content"]
    'Add.\\n\\n2+2 ='
    """
    turns = [*examples, (question, None)]
    messages: list[dict[str, str]] = []
    for i, (asked, answer) in enumerate(turns):
        messages.append({"role": "user", "content": f"{instruction}\n\n{asked}" if i == 0 and instruction else asked})
        if answer is not None:
            messages.append({"role": "assistant", "content": answer})
    return messages


def prompt_text(prompt: str | Sequence[dict[str, str]]) -> str:
    """All the text a prompt shows the model (a message list's contents joined), for checks of what a role sees."""
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(m["content"] for m in prompt)
