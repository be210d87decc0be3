"""The same two-role team as a LangGraph graph: a planner node, then a solver node.

Each node calls its agent through the `openai` client; teamrl's gateway serves each agent from its
own policy (examples/gateway/langgraph_team.yaml).
"""

from __future__ import annotations

from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from openai import OpenAI

from openai_team import PLANNER, SOLVER
from team_task import question, score


class TeamState(TypedDict, total=False):
    question: str
    plan: str
    answer: str


def build_graph(client: OpenAI):
    """planner -> solver, each node one chat completion of its agent."""

    def planner(state: TeamState) -> TeamState:
        reply = client.chat.completions.create(
            model="planner", max_tokens=24,
            messages=[{"role": "system", "content": PLANNER}, {"role": "user", "content": state["question"]}])
        return {"plan": reply.choices[0].message.content}

    def solver(state: TeamState) -> TeamState:
        reply = client.chat.completions.create(
            model="solver", max_tokens=8,
            messages=[{"role": "system", "content": SOLVER},
                      {"role": "user", "content": f"{state['question']}\nPlan: {state['plan']}"}])
        return {"answer": reply.choices[0].message.content}

    graph = StateGraph(TeamState)
    graph.add_node("planner", planner)
    graph.add_node("solver", solver)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "solver")
    graph.add_edge("solver", END)
    return graph.compile()


def run_episode(instance: dict, endpoint) -> dict:
    graph = build_graph(OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key))
    final = graph.invoke({"question": question(instance)})
    return score(instance, final["plan"], final["answer"])
