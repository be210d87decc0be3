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

Optional hooks (declared on `Workflow` with their defaults; a workflow overrides the ones it needs):
- `play_episodes(...)`: the workflow plays whole episodes itself (a user's program behind the gateway);
  default None: the driver plays them turn by turn as above;
- `apply_many(agent, states, responses)`: apply a batch of one agent's responses at once (sandboxed
  programs in one pool call); default: `apply` on each in order;
- `metrics()`: the workflow's own metrics of the last rollout, logged with the step's; default: none;
- `close()`: release what the workflow holds (sandbox workers, a gateway); default: nothing to release;
- passing a turn: `may_pass(agent, state)`, `pass_word` and `on_pass(agent, state)`, below.

Passing a turn (a workflow that keeps the defaults never sees a pass):
- `may_pass(agent, state) -> bool`: whether `agent` may pass in `state`; default: never;
- `pass_word: str`: a response that, stripped, equals it passes too (besides an empty one); default "";
- `on_pass(agent, state) -> Outcome`: what a pass does to the state (e.g. records it, so that the
  other agents or `is_done` see it) and its rewards; default: nothing changes, team 0, local 0.
A pass is the agent's sampled choice: a passing candidate is trained like any other (its tokens are
the empty response's stop token, or the pass word), and it stays in its (instance, turn, agent)
group, so advantages compare passing with answering. `apply` never receives a pass; the outcome's
`info["passed"]` is True and the transcript entry of a committed pass says `"passed": true`.

A workflow class subclasses `Workflow` to inherit the hooks' defaults (the shipped ones do). A plain
class that only has the required members is a workflow too: `with_hook_defaults` gives it the
defaults it lacks when the registry builds it or the rollout driver plays it.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from types import MethodType
from typing import Any, Protocol, runtime_checkable

Prompt = str | list[dict[str, str]]
"""What an agent sees: prompt text, or chat messages ({"role": ..., "content": ...}) for a chat model."""


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
    """What the rollout driver needs from a workflow: the required members, then the optional hooks with
    their defaults (module doc). Subclass it to inherit the defaults; a required method left out makes
    the subclass abstract (instantiating it names the method)."""

    agents: list[Agent]  # in turn order
    parallel: bool  # all agents of a turn see the same history
    max_turns: int
    pass_word: str = ""  # a response equal to it (stripped) passes, where `may_pass` allows; "": only an empty one

    @abstractmethod
    def new_state(self, split: str, index: int) -> Any:
        """A fresh episode on instance `index` of `split` ('train' or 'heldout')."""

    @abstractmethod
    def render(self, agent: str, state: Any) -> Prompt:
        """The prompt `agent` sees in `state`: text, or chat messages."""

    @abstractmethod
    def apply(self, agent: str, state: Any, response: str) -> Outcome:
        """Parse `response` and apply it to `state` in place; return its rewards.

        Must never raise on malformed text: a response that parses to nothing is applied as a
        no-op (or the episode's failure) with a negative local reward.
        """

    @abstractmethod
    def is_done(self, state: Any) -> bool:
        """The episode is over (goal reached, agents agree, budget spent)."""

    @abstractmethod
    def success(self, state: Any) -> bool:
        """Held-out metric: whether the episode solved its task."""

    def apply_many(self, agent: str, states: list[Any], responses: list[str]) -> list[Outcome]:
        """Apply `responses[i]` to `states[i]` for one agent; default: `apply` on each, in order."""
        return [self.apply(agent, state, response) for state, response in zip(states, responses)]

    def may_pass(self, agent: str, state: Any) -> bool:
        """Whether `agent` may pass its turn in `state`; default: never."""
        return False

    def on_pass(self, agent: str, state: Any) -> Outcome:
        """Apply a pass of `agent` to `state` in place; return its rewards. Default: no change, zero rewards."""
        return Outcome(team=0.0, local=0.0)

    def play_episodes(
        self,
        instances: list[int],
        split: str,
        policies: dict[str, Any],
        agent_to_policy: dict[str, str],
        params_of: dict[str, Any],
        branches: int,
        weights: Any,
        generator: Any,
        rng: Any,
        commit_rule: str = "greedy",
    ) -> tuple[list[Any], list[Any]] | None:
        """Play `branches` episodes per entry of `instances` itself; return (samples, episodes) as
        `teamrl.rollout.tree.run_episodes` does, with its arguments (policies: name -> Policy,
        params_of: agent -> SamplingParams, weights: RewardWeights, generator: torch.Generator,
        rng: random.Random). Default None: the rollout driver plays the episodes turn by turn."""
        return None

    def metrics(self) -> dict[str, float]:
        """The workflow's own metrics of its last rollout, logged with the step's; default: none."""
        return {}

    def close(self) -> None:
        """Release what the workflow holds (sandbox workers, a gateway); default: nothing to release."""
        return None  # a body, so that type checkers do not read the hook as abstract


OPTIONAL_HOOKS = ("apply_many", "may_pass", "on_pass", "play_episodes", "metrics", "close")
"""The methods `Workflow` declares with a default, which a workflow may leave out."""


def with_hook_defaults(workflow: Any) -> Workflow:
    """`workflow` itself, given `Workflow`'s default for each optional hook (and `pass_word`) it lacks.

    A subclass of `Workflow` has them all already; a plain class with the required members (the
    protocol allows one) gets the defaults bound on this instance, so callers use every hook directly.
    """
    if isinstance(workflow, Workflow):
        return workflow
    for name in OPTIONAL_HOOKS:
        if not hasattr(workflow, name):
            setattr(workflow, name, MethodType(getattr(Workflow, name), workflow))
    if not hasattr(workflow, "pass_word"):
        workflow.pass_word = Workflow.pass_word
    return workflow


def is_pass(workflow: Workflow, agent: str, state: Any, response: str) -> bool:
    """`response` passes the turn: the workflow lets `agent` pass in `state` and the response is empty
    (whitespace only) or, stripped, equals the workflow's `pass_word` (case-sensitive)."""
    if not workflow.may_pass(agent, state):
        return False
    text, word = response.strip(), workflow.pass_word
    return text == "" or (bool(word) and text == word)


def pass_turn(workflow: Workflow, agent: str, state: Any) -> Outcome:
    """The outcome of `agent` passing in `state` (the workflow's `on_pass`), marked passed."""
    outcome = workflow.on_pass(agent, state)
    outcome.info["passed"] = True
    return outcome


def role_names(workflow: Workflow) -> list[str]:
    """The distinct roles of a workflow, in first-appearance order."""
    return list(dict.fromkeys(agent.role for agent in workflow.agents))


def apply_many(workflow: Workflow, agent: str, states: list[Any], responses: list[str]) -> list[Outcome]:
    """Apply responses to states: passes (`is_pass`) go to `pass_turn`, the rest keep their order in one
    call of the workflow's `apply_many` (batched where the workflow batches, e.g. sandboxed programs)."""
    passes = [is_pass(workflow, agent, s, r) for s, r in zip(states, responses)]
    acting = [i for i, passed in enumerate(passes) if not passed]
    outcomes: list[Outcome | None] = [None] * len(states)
    if acting:
        results = workflow.apply_many(agent, [states[i] for i in acting], [responses[i] for i in acting])
        for i, outcome in zip(acting, results, strict=True):
            outcomes[i] = outcome
    for i, passed in enumerate(passes):
        if passed:
            outcomes[i] = pass_turn(workflow, agent, states[i])
    done = [outcome for outcome in outcomes if outcome is not None]
    assert len(done) == len(states)  # every state is either acting or passing
    return done
