"""A two-role team written with the plain `openai` client: a planner, then a solver.

Nothing here knows about teamrl: point the client at any OpenAI-compatible server. teamrl's gateway
hands `run_episode` an endpoint per episode and trains both agents on the rewards it returns
(examples/gateway/openai_team.yaml).
"""

from __future__ import annotations

from openai import AsyncOpenAI, OpenAI

from team_task import question, score

_client: OpenAI | None = None


def client_for(endpoint) -> OpenAI:
    """One client for every episode, re-pointed at each episode's endpoint: building an `OpenAI` client
    costs ~34 ms of CPU (an SSL context, even for http), more than the tiny model's whole turn."""
    global _client
    if _client is None:
        _client = OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
    return _client.with_options(base_url=endpoint.base_url, api_key=endpoint.api_key)


PLANNER = "You are the planner. Say in one line how to solve the problem."
SOLVER = "You are the solver. Follow the plan and end with the number."


def run_episode(instance: dict, endpoint) -> dict:
    """One episode: the planner plans, the solver answers; returns the rewards."""
    client = client_for(endpoint)
    plan = client.chat.completions.create(
        model="planner", max_tokens=24,
        messages=[{"role": "system", "content": PLANNER}, {"role": "user", "content": question(instance)}],
    ).choices[0].message.content
    answer = client.chat.completions.create(
        model="solver", max_tokens=8,
        messages=[{"role": "system", "content": SOLVER},
                  {"role": "user", "content": f"{question(instance)}\nPlan: {plan}"}],
    ).choices[0].message.content
    return score(instance, plan, answer)


async def run_episode_async(instance: dict, endpoint) -> dict:
    """The same team with the async client (teamrl runs an async entry in an event loop of its own)."""
    client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
    planned = await client.chat.completions.create(
        model="planner", max_tokens=24,
        messages=[{"role": "system", "content": PLANNER}, {"role": "user", "content": question(instance)}])
    plan = planned.choices[0].message.content
    answered = await client.chat.completions.create(
        model="solver", max_tokens=8,
        messages=[{"role": "system", "content": SOLVER},
                  {"role": "user", "content": f"{question(instance)}\nPlan: {plan}"}])
    await client.close()
    return score(instance, plan, answered.choices[0].message.content)
