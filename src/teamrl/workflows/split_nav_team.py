"""Split-Nav's team (spotter -> walker, one answer each) and its single-agent baseline.

spotter: sees the goal in a window centred on the start (not the walls) and answers the goal's
         offset, e.g. `D2L2`.
walker:  sees the map with the walls and S (not G) and the spotter's report, and answers a walk of
         U/D/L/R letters; the walk is executed and the episode ends.
single:  one agent sees both halves (the walker's map and the spotter's window) and answers the walk
         (both jobs in one answer).

Prompts: `compact` (the tiny character model's, e.g. `spot\n<window>\noffset>`) or `chat` (a real LLM's:
an instruction and two worked examples as earlier chat turns, `teamrl.workflows.chat_shots`), each
asking for exactly what the verifier reads: a bare offset, a bare walk. The walker's chat prompt also
spells out a well-formed report in words ("2 rows down and 1 column left"), a translation of what it
is shown, not more information.

Each candidate is scored when it is made (AT-GRPO's per-turn rewards): the spotter's team term is
whether its report is the goal's offset, the walker's whether its walk ends on G, which depends on
the committed report and needs it well-formed (see `teamrl.tasks.split_nav` for every term). The
reward is team + local + format; the format term (0 or minus the penalty) goes into `Outcome.local`
beside the local term.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from teamrl.tasks.plan_path import PlanPathEnv
from teamrl.tasks.split_nav import (
    Layout,
    Offset,
    SplitNavConfig,
    format_offset,
    instance,
    make_env,
    offset_of,
    parse_offset,
    parse_walk,
    render_map,
    render_radar,
    spotter_terms,
    target_of,
    walk_terms,
)
from teamrl.workflows.base import Agent, Outcome, Workflow
from teamrl.workflows.chat_shots import Example, few_shot

CHAT_INSTRUCTIONS = {
    "spotter": (
        "The map is centred on S. Where is G from S? Count the rows down (D) or up (U), then the columns "
        "left (L) or right (R). Reply with only the offset, like D2L1 (2 rows down, 1 column left) or U3."
    ),
    "walker": (
        "Walk from S to the goal on the map; '#' is a wall. Reply with only the moves as the letters U (up), "
        "D (down), L (left) and R (right), like DDL."
    ),
    "solo": (
        "Walk from S to the goal G; '#' is a wall. The first map shows the walls, the second where G is from S. "
        "Reply with only the moves as the letters U (up), D (down), L (left) and R (right), like DDL."
    ),
}
# Hand-made 4 x 4 layouts (grid rows, S, G) for the examples; a walk goes around the wall in its way.
_EXAMPLE_LAYOUTS: list[tuple[Layout, str]] = [
    ((("....", ".#..", "....", "...."), (0, 1), (2, 3)), "RRDD"),
    ((("....", "....", "..#.", "...."), (3, 0), (1, 2)), "UURR"),
]
_EXAMPLE_SIZE = 4
_MOVE_WORDS = {"U": "up", "D": "down", "L": "left", "R": "right"}


def spelled_offset(offset: Offset) -> str:
    """An offset in words: `2 rows down and 1 column left`.

    >>> spelled_offset((2, -1)), spelled_offset((0, 3)), spelled_offset((-1, 0))
    ('2 rows down and 1 column left', '3 columns right', '1 row up')
    """
    # The report's own parts (`format_offset`: vertical first, a zero part left out), each in words.
    parts = re.findall(r"([UDLR])(\d+)", format_offset(offset))
    return " and ".join(
        f"{n} {'row' if move in 'UD' else 'column'}{'s' * (n != '1')} {_MOVE_WORDS[move]}" for move, n in parts
    )


@dataclass
class SplitNavState:
    """One episode: the instance, the environment the walk steps, what the spotter reported."""

    layout: Layout
    env: PlanPathEnv
    report: str | None = None  # the spotter's committed text (None before it spoke)
    walked: bool = False
    solved: bool = False


class SplitNavWorkflow(Workflow):
    """spotter -> walker (sequential, one turn), or the single agent alone (`single_agent=True`)."""

    parallel = False

    def __init__(
        self,
        task: SplitNavConfig,
        max_turns: int = 1,
        single_agent: bool = False,
        prompt_style: str = "compact",
        **_: Any,
    ) -> None:
        if not isinstance(task, SplitNavConfig):
            raise TypeError(f"SplitNavWorkflow needs a SplitNavConfig, got {type(task).__name__}")
        if prompt_style not in ("compact", "chat"):
            raise ValueError(f"prompt_style must be 'compact' or 'chat', got {prompt_style!r}")
        self.task = task
        self.single_agent = single_agent
        self.prompt_style = prompt_style
        self.max_turns = 1  # one answer per agent: the walk ends the episode whatever max_turns says
        self.agents = (
            [Agent("solo", "solo")] if single_agent else [Agent("spotter", "spotter"), Agent("walker", "walker")]
        )

    def new_state(self, split: str, index: int) -> SplitNavState:
        layout = instance(self.task, split, index)
        return SplitNavState(layout, make_env(self.task, layout))

    def render(self, agent: str, state: SplitNavState) -> str | list[dict[str, str]]:
        if self.prompt_style == "chat":
            return self.render_chat(agent, state)
        if agent == "spotter":
            return f"spot\n{render_radar(state.layout, self.task.size)}\noffset>"
        if agent == "walker":
            return (
                f"walk\n{render_map(state.layout, show_start=True, show_goal=False)}\n"
                f"offset={state.report or '?'}\nmoves>"
            )
        if agent == "solo":
            return (
                f"solo\n{render_map(state.layout, show_start=True, show_goal=False)}\n"
                f"{render_radar(state.layout, self.task.size)}\nmoves>"
            )
        raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(a.name for a in self.agents)}")

    def render_chat(self, agent: str, state: SplitNavState) -> list[dict[str, str]]:
        """A real LLM's prompt: instruction, examples, then what this role sees (the split of the compact prompts)."""
        if agent not in CHAT_INSTRUCTIONS or agent not in {a.name for a in self.agents}:
            raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(a.name for a in self.agents)}")
        examples: list[Example] = []
        for layout, walk in _EXAMPLE_LAYOUTS:
            offset = format_offset(offset_of(layout[1], layout[2]))  # the example spotter reported it right
            examples.append(
                (_chat_question(agent, layout, _EXAMPLE_SIZE, offset), offset if agent == "spotter" else walk)
            )
        question = _chat_question(agent, state.layout, self.task.size, state.report)
        return few_shot(CHAT_INSTRUCTIONS[agent], examples, question)

    def apply(self, agent: str, state: SplitNavState, response: str) -> Outcome:
        if agent == "spotter":
            # What the walker reads is the report as written (trimmed), right or wrong.
            state.report = " ".join(response.split())[:8]
            return Outcome.from_terms(spotter_terms(self.task, state.layout, parse_offset(response, self.task.size)))
        target = (
            target_of(state.layout[1], self.reported_offset(state), self.task.size)
            if agent == "walker"
            else state.layout[2]
        )
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


def _chat_question(agent: str, layout: Layout, size: int, report: str | None) -> str:
    """What `agent` is asked in a chat prompt: the spotter the window around S (no walls), the walker the
    walls and S (no G) with the spotter's report, the single agent both maps."""
    walls = render_map(layout, show_start=True, show_goal=False)
    if agent == "spotter":
        return f"Map:\n{render_radar(layout, size)}\nOffset:"
    if agent == "walker":
        offset = parse_offset(report or "", size)
        said = (
            f"{report} (the goal is {spelled_offset(offset)} from S)"
            if offset
            else f"{report or 'none'} (not an offset)"
        )
        return f"Map:\n{walls}\nThe spotter's report: {said}\nMoves:"
    return f"Map:\n{walls}\nWhere G is from S:\n{render_radar(layout, size)}\nMoves:"
