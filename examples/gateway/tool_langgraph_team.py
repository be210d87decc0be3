"""The tool-using team of tool_team.py as a LangGraph graph: solver -> (a tool call?) -> tool -> answer ->
checker, each agent node one chat completion through the `openai` client, the tool node the program's own
calculator. Same prompts, tool and rewards as tool_team.py (examples/gateway/tool_langgraph_team.yaml).
"""

from __future__ import annotations

from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from openai import OpenAI

from tool_task import CALCULATE, last_number, run_tool, score
from tool_team import EXAMPLE, SOLVER, check, client_for


class ToolTeamState(TypedDict, total=False):
    question: str
    messages: list[dict]  # the solver's conversation: system, worked examples, question, call, tool result
    call: dict | None  # the solver's first tool call, as the client returned it
    trace: dict  # what the checker sees and the score reads (tool_team.solve's trace)
    verdict: str | None


def build_graph(client: OpenAI):
    """solver; a tool call goes to the tool node and back to the solver for its answer; then the checker."""

    def solver(state: ToolTeamState) -> ToolTeamState:
        messages = [{"role": "system", "content": SOLVER}, *EXAMPLE, {"role": "user", "content": state["question"]}]
        first = client.chat.completions.create(model="solver", messages=messages, tools=[CALCULATE],
                                               tool_choice="required", max_tokens=40,
                                               stop=["</tool_call>"]).choices[0]
        called = first.finish_reason == "tool_calls" and bool(first.message.tool_calls)
        call = first.message.tool_calls[0].model_dump(exclude_none=True) if called else None
        trace = {"expression": None, "value": None, "result": None, "text": first.message.content}
        return {"messages": messages, "call": call, "trace": trace}

    def tool(state: ToolTeamState) -> ToolTeamState:
        call, trace = state["call"], dict(state["trace"])
        trace["expression"], trace["value"], trace["result"] = run_tool(call["function"]["arguments"])
        messages = [*state["messages"], {"role": "assistant", "content": trace["text"], "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": call["id"], "content": trace["result"]}]
        return {"messages": messages, "trace": trace}

    def answer(state: ToolTeamState) -> ToolTeamState:
        final = client.chat.completions.create(model="solver", messages=state["messages"], tools=[CALCULATE],
                                               tool_choice="none", max_tokens=16).choices[0]
        return {"trace": {**state["trace"], "text": final.message.content}}

    def checker(state: ToolTeamState) -> ToolTeamState:
        trace = {**state["trace"], "answer": last_number(state["trace"]["text"])}
        return {"trace": trace, "verdict": check(client, state["question"], trace)}

    graph = StateGraph(ToolTeamState)
    for name, node in [("solver", solver), ("tool", tool), ("answer", answer), ("checker", checker)]:
        graph.add_node(name, node)
    graph.add_edge(START, "solver")
    graph.add_conditional_edges("solver", lambda state: "tool" if state["call"] else "checker", ["tool", "checker"])
    graph.add_edge("tool", "answer")
    graph.add_edge("answer", "checker")
    graph.add_edge("checker", END)
    return graph.compile()


def run_episode(instance: dict, endpoint) -> dict:
    final = build_graph(client_for(endpoint)).invoke({"question": instance["question"]})
    return score(instance, final["trace"], final["verdict"])
