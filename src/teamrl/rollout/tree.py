"""The rollout driver: runs a workflow over a batch of episodes, with or without tree sampling.

One path serves every use:
- AT-GRPO training: `branches=K` candidates per agent per turn, each scored on a copy of the
  committed state, the best one committed (the copy it was scored on *becomes* the state, so the
  state that is stepped is the state that was observed and rewarded);
- trajectory-level GRPO and evaluation: `branches=1`, K independent episodes per instance are
  simply K entries of `instances`.

Each agent samples with its own settings (`params` may map agent name -> SamplingParams, see
`teamrl.rollout.agent_params`); every row of a `sample` batch has its agent's settings. Sequential
agents are sampled one after another (each reads the previous one's commit). Parallel agents all
read the pre-turn state, so the agents of one phase that share a policy and their settings share
one `sample` call over all live episodes (one batch instead of one per agent: measured 25% less
sampling CPU time for 2 agents x 4 prompts x K = 8 on the tiny default, 4% at 32 prompts, where the
batch is already large). A passing candidate (`teamrl.workflows.base`, "Passing a turn") is
an ordinary member of its (instance, turn, agent) group.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from teamrl.policies.loading import Policy
from teamrl.rollout.builtin_engine import Generation, SamplingParams
from teamrl.rollout.engine_routing import sample, sample_many  # the policy's engine (rollout.engine)
from teamrl.rollout.sampler import SampleRequest
from teamrl.workflows.base import Outcome, Workflow, apply_many, with_hook_defaults


@dataclass
class Sample:
    """One candidate response, a training sample of the policy that serves its role."""

    generation: Generation
    outcome: Outcome
    reward: float  # team_weight * team + local_weight * local
    episode: int  # index into the batch of episodes
    instance: int  # task instance index (several episodes may share one)
    turn: int
    agent: str
    role: str
    policy: str
    committed: bool = False
    advantage: float = 0.0
    weights_version: int = 0  # updates the sampling weights had seen (the trainer's step count when sampled)

    @property
    def passed(self) -> bool:
        """This candidate passed the turn (the workflow let its agent pass and it did)."""
        return bool(self.outcome.info.get("passed", False))

    @property
    def tree_key(self) -> tuple[int, int, str]:
        """AT-GRPO group: the candidates of one agent at one turn of one instance."""
        return (self.instance, self.turn, self.agent)


@dataclass
class Episode:
    """One episode's committed trajectory."""

    instance: int
    state: Any
    turns: int = 0
    team_return: float = 0.0  # sum of the committed team rewards
    rewards_by_agent: dict[str, float] = field(default_factory=dict)
    success: bool = False
    transcript: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class RewardWeights:
    """r = team * r_team + local * r_local: the one reward formula of teamrl."""

    team: float = 1.0
    local: float = 1.0

    def combine(self, outcome: Outcome) -> float:
        return self.team * outcome.team + self.local * outcome.local


def commit_index(rewards: list[float], rule: str, rng: random.Random) -> int:
    """The committed candidate: greedy argmax with seeded tie-breaks, or sampled proportionally to softmax(reward)."""
    if rule == "greedy":
        best = max(rewards)
        return rng.choice([i for i, r in enumerate(rewards) if r == best])
    if rule == "sample":
        top = max(rewards)
        return rng.choices(range(len(rewards)), weights=[math.exp(r - top) for r in rewards])[0]
    raise ValueError(f"unknown commit rule {rule!r}; use 'greedy' or 'sample'")


def params_by_agent(
    params: SamplingParams | Mapping[str, SamplingParams], agents: list[str]
) -> dict[str, SamplingParams]:
    """Agent name -> its SamplingParams: one SamplingParams serves every agent, a mapping names each."""
    if isinstance(params, SamplingParams):
        return {agent: params for agent in agents}
    missing = [agent for agent in agents if not isinstance(params.get(agent), SamplingParams)]
    if missing:
        raise ValueError(
            f"no SamplingParams for agents {', '.join(missing)} (given for: {', '.join(params)}); "
            "pass one SamplingParams for all agents or one per agent name"
        )
    return {agent: params[agent] for agent in agents}


def _sample_phase(
    workflow: Workflow,
    live: list[int],
    source: dict[int, Any],
    policies: dict[str, Policy],
    agent_to_policy: dict[str, str],
    params_of: dict[str, SamplingParams],
    branches: int,
    generator: torch.Generator,
) -> dict[str, list[list[Generation]]]:
    """Agent name -> its groups (one per live episode) for parallel agents that all read `source`.

    Agents on one policy with the same settings share one request (prompts rendered agent by agent,
    episode by episode); the requests go through `sample_many`, so an engine that batches (a vLLM
    engine serving several LoRA policies, the built-in engine's LoRA policies on one base) samples them
    together, and the rest in order.
    """
    batches: dict[tuple[str, SamplingParams], list[str]] = {}
    for agent in workflow.agents:
        batches.setdefault((agent_to_policy[agent.name], params_of[agent.name]), []).append(agent.name)
    requests = []
    for (policy_name, params), names in batches.items():
        policy = policies[policy_name]
        prompts = [policy.encode_prompt(workflow.render(name, source[e])) for name in names for e in live]
        requests.append(SampleRequest(policy, prompts, branches, params))
    groups: dict[str, list[list[Generation]]] = {}
    for names, drawn in zip(batches.values(), sample_many(requests, generator)):
        for i, name in enumerate(names):
            groups[name] = drawn[i * len(live) : (i + 1) * len(live)]
    return groups


def run_episodes(
    workflow: Workflow,
    instances: list[int],
    split: str,
    policies: dict[str, Policy],
    agent_to_policy: dict[str, str],
    params: SamplingParams | Mapping[str, SamplingParams],
    branches: int,
    weights: RewardWeights,
    generator: torch.Generator,
    rng: random.Random,
    commit_rule: str = "greedy",
) -> tuple[list[Sample], list[Episode]]:
    """Play one episode per entry of `instances`; return every candidate sample and the episodes.

    agent_to_policy: agent name -> name in `policies` of the policy that speaks for that agent.
    params: the sampling settings of every agent, or agent name -> that agent's settings.
    A workflow whose `play_episodes` hook returns records (a user's program: teamrl.gateway) plays the
    episodes itself; otherwise (the hook's default, None) they are played turn by turn here.
    """
    workflow = with_hook_defaults(workflow)
    params_of = params_by_agent(params, [a.name for a in workflow.agents])
    played = workflow.play_episodes(
        instances, split, policies, agent_to_policy, params_of, branches, weights, generator, rng, commit_rule
    )
    if played is not None:
        return played
    unmapped = [a.name for a in workflow.agents if agent_to_policy.get(a.name) not in policies]
    if unmapped:
        raise ValueError(
            f"agents {', '.join(unmapped)} have no policy in agent_to_policy={agent_to_policy} "
            f"(policies: {', '.join(policies)}); map every agent name to a loaded policy"
        )
    episodes = [Episode(i, workflow.new_state(split, i)) for i in instances]
    samples: list[Sample] = []
    for turn in range(workflow.max_turns):
        live = [e for e in range(len(episodes)) if not workflow.is_done(episodes[e].state)]
        if not live:
            break
        for e in live:
            episodes[e].turns = turn + 1
        # Parallel agents all read the pre-turn state; sequential agents read the latest commit.
        pre_turn = {e: episodes[e].state for e in live} if workflow.parallel else None
        # Parallel agents' prompts are all known now: sampled together, one batch per engine that batches
        # (several agents' LoRA adapters on one base, built-in or vLLM); other policies are sampled in order.
        pre_sampled = (
            _sample_phase(workflow, live, pre_turn, policies, agent_to_policy, params_of, branches, generator)
            if pre_turn is not None
            else {}
        )
        commits: list[tuple[int, str, str]] = []
        for agent in workflow.agents:
            if not workflow.parallel:
                live = [e for e in live if not workflow.is_done(episodes[e].state)]
            if not live:
                break
            source = {e: (pre_turn[e] if pre_turn else episodes[e].state) for e in live}
            policy_name = agent_to_policy[agent.name]
            policy = policies[policy_name]
            groups = pre_sampled.get(agent.name)
            if groups is None:
                prompts = [policy.encode_prompt(workflow.render(agent.name, source[e])) for e in live]
                groups = sample(policy, prompts, branches, params_of[agent.name], generator)
            # Score every candidate on its own copy (in place when there is only one).
            targets = [
                source[e] if branches == 1 and not workflow.parallel else copy.deepcopy(source[e])
                for e in live
                for _ in range(branches)
            ]
            texts = [g.text for group in groups for g in group]
            outcomes = apply_many(workflow, agent.name, targets, texts)
            for j, e in enumerate(live):
                block = range(j * branches, (j + 1) * branches)
                rewards = [weights.combine(outcomes[b]) for b in block]
                chosen = commit_index(rewards, commit_rule, rng)
                for k, b in enumerate(block):
                    samples.append(
                        Sample(
                            groups[j][k],
                            outcomes[b],
                            rewards[k],
                            e,
                            episodes[e].instance,
                            turn,
                            agent.name,
                            agent.role,
                            policy_name,
                            committed=(k == chosen),
                        )
                    )
                ep, win = episodes[e], block[chosen]
                ep.team_return += outcomes[win].team
                ep.rewards_by_agent[agent.name] = ep.rewards_by_agent.get(agent.name, 0.0) + rewards[chosen]
                entry = {
                    "turn": turn,
                    "agent": agent.name,
                    "text": texts[win],
                    "reward": rewards[chosen],
                    "terms": outcomes[win].terms,
                }
                if outcomes[win].info.get("passed"):
                    entry["passed"] = True
                ep.transcript.append(entry)
                if workflow.parallel:
                    commits.append((e, agent.name, texts[win]))
                else:
                    ep.state = targets[win]
        for e, agent_name, text in commits:  # through apply_many, so that a committed pass is a pass
            apply_many(workflow, agent_name, [episodes[e].state], [text])
    for ep in episodes:
        ep.success = workflow.success(ep.state)
    return samples, episodes
