"""A tool-using team written with the plain `openai` client: a solver that must call a `calculate` tool,
and a checker that judges the solver's answer from the tool trace.

1. The solver gets an arithmetic word problem (numbers too large for a small model to work out) and the
   `calculate` tool. The program runs a call itself (tool_task.calculate: parsed with `ast`, integers and
   + - * / only) and sends the result back as a `role: tool` message; the solver then answers.
2. The checker sees the question, the solver's calculation and its answer, and replies ACCEPT, REJECT or
   the right number. Its reply decides the team's final answer (tool_task.score).

Nothing here knows about teamrl: point the client at any OpenAI-compatible server that parses tool calls.
teamrl's gateway hands `run_episode` an endpoint per episode and trains both agents on the rewards it
returns (examples/gateway/tool_team.yaml).
"""

from __future__ import annotations

import json

from openai import OpenAI

from tool_task import CALCULATE, last_number, run_tool, score

_client: OpenAI | None = None


def client_for(endpoint) -> OpenAI:
    """One client for every episode, re-pointed at each episode's endpoint (building one costs ~34 ms of CPU)."""
    global _client
    if _client is None:
        _client = OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    return _client.with_options(base_url=endpoint.base_url, api_key=endpoint.api_key)


SOLVER = ("You are the solver. Do not compute in your head: call the calculate tool with the expression "
          "the question needs, then give the number it returns.")


def _worked(question: str, expression: str, value: int, answer: str, key: str) -> list[dict]:
    arguments = json.dumps({"expression": expression})
    call = {"id": key, "type": "function", "function": {"name": "calculate", "arguments": arguments}}
    return [{"role": "user", "content": question}, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": key, "content": str(value)},
            {"role": "assistant", "content": answer}]


# Worked examples as earlier turns of the conversation: SmolLM2-135M-Instruct (T 0.7) wrote no call in 32
# held-out questions with the tool instructions alone (nor with one example call in the system prompt), and a
# valid call in 6-16% of them with these two (docs/howto/gateway.md, A team that calls a tool).
EXAMPLE = [
    *_worked("A shop packs 305 beads in each of 12 bags. How many beads does it pack?", "305 * 12", 3660,
             "The shop packs 3660 beads.", "call_example_1"),
    *_worked("A bakery sold 214 rolls on Friday, 378 on Saturday and 166 on Sunday. How many rolls did it sell?",
             "214 + 378 + 166", 758, "The bakery sold 758 rolls.", "call_example_2"),
]
CHECKER = ("You are the checker. Read the question and the solver's calculation. If the calculation and the "
           "answer are right, reply ACCEPT. Otherwise reply with the right number, or REJECT.")
CHECKED = [  # two judged reports as earlier turns, as for the solver
    {"role": "user", "content": "Question: A shop packs 305 beads in each of 12 bags. How many beads does it pack?\n"
                                "Calculation: calculate(305 * 12) = 3660\nSolver's answer: 3660"},
    {"role": "assistant", "content": "ACCEPT"},
    {"role": "user", "content": "Question: A bakery sold 214 rolls on Friday, 378 on Saturday and 166 on Sunday. "
                                "How many rolls did it sell?\nCalculation: calculate(214 + 378 + 166) = 758\n"
                                "Solver's answer: 738"},
    {"role": "assistant", "content": "758"},
]


def solve(client: OpenAI, question: str) -> dict:
    """The solver's turns: a tool call, its result sent back, the answer. Returns the trace the checker sees
    and the score reads: the expression, the tool's value (None: no call, or one the tool could not run),
    the tool's text, the solver's final text and its number."""
    messages = [{"role": "system", "content": SOLVER}, *EXAMPLE, {"role": "user", "content": question}]
    first = client.chat.completions.create(model="solver", messages=messages, tools=[CALCULATE],
                                           tool_choice="required", max_tokens=40, stop=["</tool_call>"]).choices[0]
    trace = {"expression": None, "value": None, "result": None, "text": first.message.content}
    if first.finish_reason == "tool_calls" and first.message.tool_calls:
        call = first.message.tool_calls[0]  # the first call answers; the fallback prompt asks for one
        trace["expression"], trace["value"], trace["result"] = run_tool(call.function.arguments)
        messages.append({"role": "assistant", "content": first.message.content,
                         "tool_calls": [call.model_dump(exclude_none=True)]})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": trace["result"]})
        final = client.chat.completions.create(model="solver", messages=messages, tools=[CALCULATE],
                                               tool_choice="none", max_tokens=16).choices[0]
        trace["text"] = final.message.content
    trace["answer"] = last_number(trace["text"])
    return trace


def check(client: OpenAI, question: str, trace: dict) -> str | None:
    """The checker's turn: ACCEPT, REJECT or a number, from the question and the solver's trace."""
    if trace["result"] is None:
        calculation = "the solver did not use the calculator"
    else:
        calculation = f"calculate({trace['expression'] or '?'}) = {trace['result']}"
    report = (f"Question: {question}\nCalculation: {calculation}\n"
              f"Solver's answer: {trace['answer'] if trace['answer'] is not None else 'none'}")
    reply = client.chat.completions.create(
        model="checker", max_tokens=12,
        messages=[{"role": "system", "content": CHECKER}, *CHECKED, {"role": "user", "content": report}])
    return reply.choices[0].message.content


def run_episode(instance: dict, endpoint) -> dict:
    """One episode: the solver calls the tool and answers, the checker judges; returns the rewards."""
    client = client_for(endpoint)
    trace = solve(client, instance["question"])
    return score(instance, trace, check(client, instance["question"], trace))
