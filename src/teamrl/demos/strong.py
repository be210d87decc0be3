"""Strong scripted teams: the tasks' scripted agents with every error behaviour switched off.

The warm-up imitates deliberately broad scripts (right about half the time); offline SFT wants the
opposite, the scripts' correct behaviour only. The scripts are reused unchanged, with a skill whose
correct shares are 1 and every error share 0, so the strong team is the same code as the warm-up's.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from teamrl.demos import split_calc, split_nav
from teamrl.demos.driver import Respond
from teamrl.workflows.base import Workflow

STRONG_CALC = split_calc.CalcSkill(
    formula_correct=1.0,
    formula_other_op=0.0,
    formula_swapped=0.0,
    formula_operator=0.0,
    value_correct=1.0,
    value_swapped=0.0,
    value_off_by_one=0.0,
    value_precedence=0.0,
    value_random=0.0,
)
STRONG_NAV = split_nav.NavSkill(
    spot_correct=1.0,
    spot_off_by_one=0.0,
    spot_flipped=0.0,
    spot_exchanged=0.0,
    spot_random=0.0,
    walk_correct=1.0,
    walk_short_by_one=0.0,
    walk_one_too_long=0.0,
    walk_flipped=0.0,
    walk_random=0.0,
)


def _split_calc(workflow: Workflow) -> Respond:
    return lambda agent, state, rng: split_calc.respond(agent, state, rng, STRONG_CALC)


def _split_nav(workflow: Workflow) -> Respond:
    size = workflow.task.size  # type: ignore[attr-defined]
    return lambda agent, state, rng: split_nav.respond(agent, state, rng, STRONG_NAV, size)


STRONG_TEAMS: dict[str, Callable[[Workflow], Respond]] = {"split_calc": _split_calc, "split_nav": _split_nav}
"""Task name -> builder of its strong scripted `respond(agent, state, rng)` for a built workflow."""


def strong_team(task: str, workflow: Workflow) -> Respond:
    """The strong scripted team of `task`, or a ValueError naming the tasks that have one."""
    if task not in STRONG_TEAMS:
        raise ValueError(
            f"task {task!r} has no strong scripted team (tasks with one: "
            f"{', '.join(sorted(STRONG_TEAMS))}); make transcripts from a trained run instead: "
            "`teamrl transcripts CONFIG --from RUN_DIR --out FILE`"
        )
    return STRONG_TEAMS[task](workflow)


def replay(texts: dict[str, list[str]]) -> Respond:
    """A `respond` that answers each agent with its recorded texts, in order (to replay an episode)."""
    queues = {agent: list(reversed(said)) for agent, said in texts.items()}

    def respond(agent: str, state: Any, rng: random.Random) -> str:
        if not queues.get(agent):
            raise ValueError(f"the recorded episode has no further answer of agent {agent!r}")
        return queues[agent].pop()

    return respond
