"""Imperfect scripted Plan-Path agents, whose transcripts warm up the tiny default model.

The tool is imperfect on purpose and in a *systematic* way, so that a model imitating it is weak
even under greedy decoding (random noise would average out: the most likely token stays right):
- the scripted tool calls `bfs(grid,goal,start)` instead of `bfs(grid,start,goal)` most of the
  time (a path that, walked from the start, goes wrong);
- the scripted planner follows a tool proposal whose simulation reached the goal (so the warmed-up
  planner knows how to rely on one), and otherwise plans in its head: the true shortest
  path or a wall-blind "rows first, then columns" walk, which fails on long or walled paths.
So the untrained team is about as weak as a planner alone; it becomes strong when the tool learns
its arguments and the planner learns to rely on it.
"""

from __future__ import annotations

import io
import random
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass

from teamrl.tasks.plan_path import PlanPathEnv
from teamrl.workflows.plan_path_team import PlanPathState, PlanPathWorkflow


@dataclass(frozen=True)
class ScriptedSkill:
    """How often each scripted agent does the right thing."""

    tool_correct: float = 0.35
    """Probability that the tool calls bfs(grid,start,goal) rather than bfs(grid,goal,start)."""
    plan_trust: float = 1.0
    """Probability that the planner follows a tool proposal whose simulation reached the goal."""
    plan_shortest: float = 0.5
    """When planning in its head: probability of the true shortest path (else the wall-blind walk)."""


class TrustedRunner:
    """Runs the scripted tool's own programs in-process (never model output: that goes to the sandbox)."""

    def run(self, sources: list[str]) -> list[tuple[str, bool]]:
        results = []
        for source in sources:
            buffer = io.StringIO()
            with redirect_stdout(buffer):
                exec(compile(source, "<scripted-tool>", "exec"), {})  # noqa: S102 - our own code
            results.append((buffer.getvalue(), True))
        return results


def wall_blind_walk(env: PlanPathEnv) -> str:
    """Vertical moves first, then horizontal, ignoring walls."""
    (r, c), (gr, gc) = env.position, env.goal
    return ("D" * (gr - r) if gr > r else "U" * (r - gr)) + ("R" * (gc - c) if gc > c else "L" * (c - gc))


def scripted_tool(state: PlanPathState, rng: random.Random, skill: ScriptedSkill) -> str:
    if rng.random() < skill.tool_correct:
        return "print(bfs(grid,start,goal))"
    return "print(bfs(grid,goal,start))"


def scripted_plan(state: PlanPathState, rng: random.Random, skill: ScriptedSkill, with_tool: bool) -> str:
    if with_tool and state.simulation == "goal" and rng.random() < skill.plan_trust:
        return "follow"
    if rng.random() < skill.plan_shortest:
        return state.env.shortest_path()
    return wall_blind_walk(state.env)


def demonstrations(workflow: PlanPathWorkflow, seed: int, skill: ScriptedSkill) -> Iterator[tuple[str, str, str]]:
    """Endless (agent, prompt, response) triples from scripted episodes on training instances."""
    rng = random.Random(seed)
    with_tool = not workflow.single_agent
    index = seed * 1_000_003 % 10_000_000
    while True:
        index += 1
        state = workflow.new_state("train", index)
        for _ in range(workflow.max_turns):
            for agent in workflow.agents:
                if workflow.is_done(state):
                    break
                prompt = workflow.compact_render(agent.name, state)
                if agent.name == "tool":
                    response = scripted_tool(state, rng, skill)
                else:
                    response = scripted_plan(state, rng, skill, with_tool)
                yield agent.name, prompt, response
                workflow.apply(agent.name, state, response)
            if workflow.is_done(state):
                break
