"""The flow workflows (voting, evaluator-optimizer, orchestrator-workers, debate), as the task registry builds them.

`workflow.name` in a config picks one of `FLOW_KINDS` for the math or code task; each is built
from the task's settings with the config's `max_turns`, `prompt_style` and `format_bonus`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from teamrl.workflows.base import Workflow
from teamrl.workflows.debate import DebateWorkflow
from teamrl.workflows.evaluator_optimizer import EvaluatorOptimizerWorkflow
from teamrl.workflows.flow_domains import flow_domain
from teamrl.workflows.orchestrator_workers import OrchestratorWorkersWorkflow
from teamrl.workflows.voting import VotingWorkflow


def _kind(cls: type) -> Callable[..., Workflow]:
    def build(
        settings: Any,
        max_turns: int | None = None,
        prompt_style: str = "compact",
        format_bonus: float = 0.1,
        runner: Any = None,
    ) -> Workflow:
        turns = {} if max_turns is None else {"max_turns": max_turns}  # None: the workflow's default
        return cls(flow_domain(settings, runner), prompt_style=prompt_style, format_bonus=format_bonus, **turns)

    build.__doc__ = f"{cls.__name__} on the task of `settings` (math or code)."
    return build


FLOW_SOURCES = ("teamrl.demos.flows",) + tuple(
    f"teamrl.workflows.{name}"
    for name in (
        "flow_kinds",
        "flow_common",
        "flow_domains",
        "voting",
        "evaluator_optimizer",
        "orchestrator_workers",
        "debate",
    )
)
"""Modules whose code shapes the flow workflows' demonstrations (hashed into the warm-up cache key)."""

FLOW_KINDS: dict[str, Callable[..., Workflow]] = {
    "voting": _kind(VotingWorkflow),
    "evaluator_optimizer": _kind(EvaluatorOptimizerWorkflow),
    "orchestrator_workers": _kind(OrchestratorWorkersWorkflow),
    "debate": _kind(DebateWorkflow),
}
