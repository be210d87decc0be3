"""The contract of a multi-agent workflow: who speaks when, what each sees, what each answer does.

A workflow owns an episode *state* (the task environment plus whatever the agents said), renders
each agent's prompt from it, and applies an agent's text response to it. The rollout driver only
copies states (`copy.deepcopy`) to score candidates and commits one response per agent per turn:

    state = workflow.new_state(split, index)
    for turn in range(workflow.max_turns):
        for agent in workflow.agents:             # sequential: each sees the previous commits
            prompt = workflow.render(agent.name, state)
            outcome = workflow.apply(agent.name, state, response)
        if workflow.is_done(state): break

In parallel mode every agent of a turn is rendered before any is applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Agent:
    """One speaker. Several agents may play the same role (three voters); a role maps to a policy."""

    name: str
    role: str


@dataclass
class Outcome:
    """The rewards of applying one response to a state.

    The trained reward is `team_weight * team + local_weight * local` (weights in the algorithm
    config); `terms` itemises both for logs and tests.
    """

    team: float
    local: float
    terms: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Workflow(Protocol):
    """What the rollout driver needs from a workflow."""

    agents: list[Agent]  # in turn order
    parallel: bool  # all agents of a turn see the same history
    max_turns: int

    def new_state(self, split: str, index: int) -> Any:
        """A fresh episode on instance `index` of `split` ('train' or 'heldout')."""

    def render(self, agent: str, state: Any) -> str:
        """The prompt text `agent` sees in `state`."""

    def apply(self, agent: str, state: Any, response: str) -> Outcome:
        """Parse `response` and apply it to `state` in place; return its rewards.

        Must never raise on malformed text: a response that parses to nothing is applied as a
        no-op (or the episode's failure) with a negative local reward.
        """

    def is_done(self, state: Any) -> bool:
        """The episode is over (goal reached, agents agree, budget spent)."""

    def success(self, state: Any) -> bool:
        """Held-out metric: whether the episode solved its task."""


def role_names(workflow: Workflow) -> list[str]:
    """The distinct roles of a workflow, in first-appearance order."""
    return list(dict.fromkeys(agent.role for agent in workflow.agents))


def apply_many(workflow: Any, agent: str, states: list[Any], responses: list[str]) -> list[Outcome]:
    """Apply responses to states; uses the workflow's batched `apply_many` when it has one.

    A batched hook lets a workflow run expensive side effects (sandboxed programs) in one pool call.
    """
    batched = getattr(workflow, "apply_many", None)
    if batched is not None:
        return batched(agent, states, responses)
    return [workflow.apply(agent, s, r) for s, r in zip(states, responses)]
