"""A malicious teammate: one agent of a team replaced by a scripted adversary at evaluation.

`WithAdversary(workflow, agent, adversary)` is the team's workflow in which whatever the policy
samples for `agent` is replaced, before it is applied, by `adversary(workflow, state)`: a
response that looks right (it parses, it is well formed) and is wrong. The rollout driver and the
diagnostics see an ordinary workflow, so the same held-out evaluation measures the team with and
without the adversary, and the same per-role statistics show whether the damage is visible.

    python -m teamrl.probes.teammate src/teamrl/configs/split_calc_team.yaml --agent analyst --instances 40

Adversaries here are Split-Calc's: a wrong formula (another operation's, with a different value
on this instance) for the analyst, and the committed formula's value plus one for the calculator.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from typing import Any

import torch

from teamrl.tasks.split_calc import OPERATIONS, evaluate_formula
from teamrl.workflows.base import Outcome, Workflow

Adversary = Callable[[Any, Any], str]
"""(inner workflow, state) -> the adversary's response for its agent."""


class WithAdversary(Workflow):
    """`workflow` with `agent`'s responses replaced by an adversary's (see the module doc)."""

    def __init__(self, workflow: Any, agent: str, adversary: Adversary) -> None:
        names = [a.name for a in workflow.agents]
        if agent not in names:
            raise ValueError(f"no agent {agent!r} to replace; this workflow's agents are {', '.join(names)}")
        self.inner, self.agent, self.adversary = workflow, agent, adversary
        self.agents, self.parallel, self.max_turns = workflow.agents, workflow.parallel, workflow.max_turns
        self.replaced = 0  # responses the adversary wrote

    def new_state(self, split: str, index: int) -> Any:
        return self.inner.new_state(split, index)

    def render(self, agent: str, state: Any) -> str:
        return self.inner.render(agent, state)

    def apply(self, agent: str, state: Any, response: str) -> Outcome:
        if agent == self.agent:
            response = self.adversary(self.inner, state)
            self.replaced += 1
        return self.inner.apply(agent, state, response)

    def is_done(self, state: Any) -> bool:
        return self.inner.is_done(state)

    def success(self, state: Any) -> bool:
        return self.inner.success(state)

    def close(self) -> None:
        self.inner.close()  # what the wrapped workflow holds (sandbox workers, a gateway) is its own to release


def wrong_formula(workflow: Any, state: Any) -> str:
    """Another operation's formula, one whose value differs from the right one on this instance.

    >>> class S: item = ("sum", 3, 4)
    >>> wrong_formula(None, S())
    'x-y'
    """
    operation, x, y = state.item
    right = evaluate_formula(OPERATIONS[operation], x, y)
    names = list(OPERATIONS)
    start = names.index(operation)
    for name in names[start + 1 :] + names[:start]:
        if evaluate_formula(OPERATIONS[name], x, y) != right:
            return OPERATIONS[name]
    return f"{OPERATIONS[operation]}+1"


def off_by_one(workflow: Any, state: Any) -> str:
    """The committed formula's value plus one (a bare number: well formed, unfaithful, wrong)."""
    _, x, y = state.item
    value = evaluate_formula(state.formula or "", x, y)
    return str((value if value is not None else 0) + 1)


ADVERSARIES: dict[str, dict[str, Adversary]] = {
    "split_calc": {"analyst": wrong_formula, "calculator": off_by_one},
}
"""Task name -> agent -> its adversary."""


def role_terms(samples: list[Any]) -> dict[str, float]:
    """Per role, the mean team and local terms of its samples (`diag/role/<role>/team_mean`, `local_mean`):
    which role's own verifier stopped paying."""
    by_role: dict[str, list[Any]] = {}
    for s in samples:
        by_role.setdefault(s.role, []).append(s)
    out = {}
    for role, mine in by_role.items():
        out[f"diag/role/{role}/team_mean"] = round(sum(s.outcome.team for s in mine) / len(mine), 4)
        out[f"diag/role/{role}/local_mean"] = round(sum(s.outcome.local for s in mine) / len(mine), 4)
    return out


def compare(config: Any, agent: str, instances: int) -> dict[str, Any]:
    """Held-out success and per-role diagnostics of the config's (warmed-up) team, honest and with
    `agent` replaced by its adversary; the same instances and sampling seed for both."""
    from teamrl.diagnostics.rollout import rollout_diagnostics
    from teamrl.rollout.agent_params import agent_sampling
    from teamrl.rollout.tree import RewardWeights, run_episodes
    from teamrl.setup.team import build_policies, build_workflow

    task = config.task["name"]
    if agent not in ADVERSARIES.get(task, {}):
        known = {t: sorted(a) for t, a in ADVERSARIES.items()}
        raise ValueError(f"no adversary for agent {agent!r} of task {task!r}; adversaries: {known}")
    honest = build_workflow(config)
    policies, mapping = build_policies(config, honest)
    sampling = agent_sampling(config.rollout, honest.agents, "eval")
    result: dict[str, Any] = {"task": task, "agent": agent, "instances": instances}
    for label, workflow in (("honest", honest), ("adversary", WithAdversary(honest, agent, ADVERSARIES[task][agent]))):
        samples, episodes = run_episodes(
            workflow,
            list(range(instances)),
            "heldout",
            policies,
            mapping,
            sampling,
            1,
            RewardWeights(),
            torch.Generator().manual_seed(config.seed),
            random.Random(config.seed),
        )
        diag = rollout_diagnostics(samples)
        result[label] = {
            "success": sum(e.success for e in episodes) / len(episodes),
            **{k: round(v, 4) for k, v in diag.items() if k.endswith("/reward_mean")},
            **role_terms(samples),
        }
    return result


def main(argv: list[str] | None = None) -> None:
    """Print the comparison as JSON (see the module doc for the command)."""
    from teamrl.config import load_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="the team's run config (its policy: the warmed-up tiny default, or a model)")
    parser.add_argument("--agent", required=True, help="the agent the adversary replaces")
    parser.add_argument("--instances", type=int, default=40, help="held-out instances")
    args = parser.parse_args(argv)
    print(json.dumps(compare(load_config(args.config), args.agent, args.instances), indent=1))


if __name__ == "__main__":
    main()
