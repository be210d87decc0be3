"""Reward-hacking probes: for every registered task, responses that try to score without solving,
scored through the task's own workflow (`teamrl probe`; docs/verifiers/reward-hacking.md).

    rows = probe_task("split_calc", instances=4)     # one ProbeRow per (hack, instance)
    count(rows)                                      # (task, kind, tried, rewarded) per hack kind

A task registered by a user gets a probe with `register_catalogue(name, attempts)`, where
`attempts(workflow, state) -> list[Attempt]` builds the hacks of one instance.
"""

from __future__ import annotations

import copy
from typing import Any

from teamrl.probes.code_hacks import code_attempts
from teamrl.probes.core import Attempt, Catalogue, ProbeRow, count, score_attempts
from teamrl.probes.math_hacks import math_attempts
from teamrl.probes.plan_hacks import CATALOGUES as PLAN_CATALOGUES
from teamrl.probes.split_hacks import split_calc_attempts, split_nav_attempts
from teamrl.probes.flow_hacks import calc_flows_attempts
from teamrl.config.tasks import TASKS, task_settings

CATALOGUES: dict[str, Catalogue] = {
    "math": math_attempts,
    "code": code_attempts,
    **PLAN_CATALOGUES,
    "split_nav": split_nav_attempts,
    "split_calc": split_calc_attempts,
    "calc_flows": calc_flows_attempts,
}
"""Task name -> the hacks of one instance of it."""

__all__ = ["Attempt", "CATALOGUES", "ProbeRow", "count", "probe_task", "register_catalogue"]


def register_catalogue(name: str, attempts: Catalogue) -> None:
    """Give task `name` (registered with `register_task`) its hacks; names are unique."""
    if name in CATALOGUES:
        raise ValueError(f"task {name!r} already has a reward-hacking catalogue")
    CATALOGUES[name] = attempts


def probe_task(
    name: str, instances: int = 4, task: dict[str, Any] | None = None, catalogue: Catalogue | None = None
) -> list[ProbeRow]:
    """Every hack of task `name` on held-out instances 0..instances-1 of its team workflow.

    task: the `task:` config section's other keys (e.g. {"source": "gsm8k"}); default: the task's
    defaults. catalogue: the hacks to play (default: the task's own, `CATALOGUES[name]`).
    """
    if instances < 1:
        raise ValueError(f"instances must be >= 1, got {instances}")
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; registered tasks: {', '.join(sorted(TASKS))}")
    attempts_of = catalogue or CATALOGUES.get(name)
    if attempts_of is None:
        raise ValueError(
            f"task {name!r} has no reward-hacking catalogue; add one with "
            "teamrl.probes.register_catalogue(name, attempts) (see teamrl.probes.core.Catalogue)"
        )
    workflow = TASKS[name].build("team", task_settings({"name": name, **(task or {})}))
    rows: list[ProbeRow] = []
    try:
        for index in range(instances):
            state = workflow.new_state("heldout", index)
            attempts = attempts_of(workflow, copy.deepcopy(state))
            rows += score_attempts(name, workflow, index, attempts, state)
    finally:
        workflow.close()
    return rows
