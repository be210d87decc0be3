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

Passing a turn (optional; a workflow without these hooks never sees a pass):
- `may_pass(agent, state) -> bool`: whether `agent` may pass in `state`;
- `pass_word: str`: a response that, stripped, equals it passes too (besides an empty one);
- `on_pass(agent, state) -> Outcome`: what a pass does to the state (e.g. records it, so that the
  other agents or `is_done` see it) and its rewards; default: nothing changes, team 0, local 0.
A pass is the agent's sampled choice: a passing candidate is trained like any other (its tokens are
the empty response's stop token, or the pass word), and it stays in its (instance, turn, agent)
group, so advantages compare passing with answering. `apply` never receives a pass; the outcome's
`info["passed"]` is True and the transcript entry of a committed pass says `"passed": true`.
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

    @classmethod
    def from_terms(cls, terms: dict[str, float]) -> "Outcome":
        """An Outcome from (team, local, format) terms: the format term goes into the local reward."""
        return cls(team=terms["team"], local=terms["local"] + terms["format"], terms=dict(terms))


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


class PassHooks(Protocol):
    """The optional hooks of a workflow whose agents may pass a turn (see the module doc)."""

    pass_word: str  # optional; "" or absent: only an empty response passes

    def may_pass(self, agent: str, state: Any) -> bool:
        """Whether `agent` may pass in `state` (absent: never)."""

    def on_pass(self, agent: str, state: Any) -> Outcome:
        """Apply a pass of `agent` to `state` in place; return its rewards (absent: no change, zero rewards)."""


def is_pass(workflow: Any, agent: str, state: Any, response: str) -> bool:
    """`response` passes the turn: the workflow lets `agent` pass in `state` and the response is empty
    (whitespace only) or, stripped, equals the workflow's `pass_word` (case-sensitive)."""
    may_pass = getattr(workflow, "may_pass", None)
    if may_pass is None or not may_pass(agent, state):
        return False
    text, word = response.strip(), getattr(workflow, "pass_word", "")
    return text == "" or (bool(word) and text == word)


def pass_turn(workflow: Any, agent: str, state: Any) -> Outcome:
    """The outcome of `agent` passing in `state` (the workflow's `on_pass`, else zero rewards), marked passed."""
    hook = getattr(workflow, "on_pass", None)
    outcome = hook(agent, state) if hook is not None else Outcome(team=0.0, local=0.0)
    outcome.info["passed"] = True
    return outcome


def role_names(workflow: Workflow) -> list[str]:
    """The distinct roles of a workflow, in first-appearance order."""
    return list(dict.fromkeys(agent.role for agent in workflow.agents))


def apply_many(workflow: Any, agent: str, states: list[Any], responses: list[str]) -> list[Outcome]:
    """Apply responses to states; uses the workflow's batched `apply_many` when it has one.

    A batched hook lets a workflow run expensive side effects (sandboxed programs) in one pool call.
    Passes (`is_pass`) go to `pass_turn` instead; the rest keep their order in one `apply` batch.
    """
    passes = [is_pass(workflow, agent, s, r) for s, r in zip(states, responses)]
    acting = [i for i, passed in enumerate(passes) if not passed]
    outcomes: list[Outcome | None] = [None] * len(states)
    if acting:
        batched = getattr(workflow, "apply_many", None)
        some_states, some_responses = [states[i] for i in acting], [responses[i] for i in acting]
        if batched is not None:
            results = batched(agent, some_states, some_responses)
        else:
            results = [workflow.apply(agent, s, r) for s, r in zip(some_states, some_responses)]
        for i, outcome in zip(acting, results, strict=True):
            outcomes[i] = outcome
    for i, passed in enumerate(passes):
        if passed:
            outcomes[i] = pass_turn(workflow, agent, states[i])
    return outcomes
