"""Split-Nav's team (spotter -> walker, one answer each) and its single-agent baseline.

spotter: sees the goal in a window centred on the start (not the walls) and answers the goal's
         offset, e.g. `D2L2`.
walker:  sees the map with the walls and S (not G) and the spotter's report, and answers a walk of
         U/D/L/R letters; the walk is executed and the episode ends.
single:  one agent sees both halves (the walker's map and the spotter's window) and answers the walk
         (both jobs in one answer).

Each candidate is scored when it is made (AT-GRPO's per-turn rewards): the spotter's team term is
whether its report is the goal's offset, the walker's whether its walk ends on G, which depends on
the committed report and needs it well-formed (see `teamrl.tasks.split_nav` for every term). The
reward is team + local + format; the format term (0 or minus the penalty) goes into `Outcome.local`
beside the local term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from teamrl.tasks.plan_path import PlanPathEnv
from teamrl.tasks.split_nav import (Layout, Offset, SplitNavConfig, instance, make_env, parse_offset, parse_walk,
                                    render_map, render_radar, spotter_terms, target_of, walk_terms)
from teamrl.workflows.base import Agent, Outcome


@dataclass
class SplitNavState:
    """One episode: the instance, the environment the walk steps, what the spotter reported."""

    layout: Layout
    env: PlanPathEnv
    report: str | None = None  # the spotter's committed text (None before it spoke)
    walked: bool = False
    solved: bool = False


class SplitNavWorkflow:
    """spotter -> walker (sequential, one turn), or the single agent alone (`single_agent=True`)."""

    parallel = False

    def __init__(self, task: SplitNavConfig, max_turns: int = 1, single_agent: bool = False,
                 prompt_style: str = "compact", **_: Any) -> None:
        if not isinstance(task, SplitNavConfig):
            raise TypeError(f"SplitNavWorkflow needs a SplitNavConfig, got {type(task).__name__}")
        if prompt_style != "compact":
            raise ValueError("split_nav has compact prompts only (workflow.prompt_style: compact)")
        self.task = task
        self.single_agent = single_agent
        self.prompt_style = prompt_style
        self.max_turns = 1  # one answer per agent: the walk ends the episode whatever max_turns says
        self.agents = [Agent("solo", "solo")] if single_agent else [Agent("spotter", "spotter"),
                                                                    Agent("walker", "walker")]

    def new_state(self, split: str, index: int) -> SplitNavState:
        layout = instance(self.task, split, index)
        return SplitNavState(layout, make_env(self.task, layout))

    def render(self, agent: str, state: SplitNavState) -> str:
        if agent == "spotter":
            return f"spot\n{render_radar(state.layout, self.task.size)}\noffset>"
        if agent == "walker":
            return (f"walk\n{render_map(state.layout, show_start=True, show_goal=False)}\n"
                    f"offset={state.report or '?'}\nmoves>")
        if agent == "solo":
            return (f"solo\n{render_map(state.layout, show_start=True, show_goal=False)}\n"
                    f"{render_radar(state.layout, self.task.size)}\nmoves>")
        raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(a.name for a in self.agents)}")

    def apply(self, agent: str, state: SplitNavState, response: str) -> Outcome:
        if agent == "spotter":
            # What the walker reads is the report as written (trimmed), right or wrong.
            state.report = " ".join(response.split())[:8]
            return Outcome.from_terms(spotter_terms(self.task, state.layout, parse_offset(response, self.task.size)))
        target = target_of(state.layout[1], self.reported_offset(state), self.task.size) \
            if agent == "walker" else state.layout[2]
        terms = walk_terms(self.task, state.env, parse_walk(response, self.task.step_budget), target)
        if agent == "walker" and self.reported_offset(state) is None:
            # The team solves the task through a well-formed report: a spotter that writes the walk
            # itself (or anything else the walker could copy) instead of an offset earns the team nothing.
            terms["team"] = 0.0
        state.walked, state.solved = True, terms["team"] == 1.0
        return Outcome.from_terms(terms)

    def is_done(self, state: SplitNavState) -> bool:
        return state.walked

    def success(self, state: SplitNavState) -> bool:
        return state.solved

    def reported_offset(self, state: SplitNavState) -> Offset | None:
        """The offset the spotter's report names (None: no report or a malformed one)."""
        return parse_offset(state.report or "", self.task.size)
