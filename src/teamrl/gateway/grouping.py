"""Program runs -> the Sample and Episode records the rest of teamrl trains on.

A recorded call becomes a Sample with turn = that agent's call index, so `Sample.tree_key` is
(instance, call index, agent): the K runs of one instance put their agents' i-th calls in one group,
and `assign_advantages` / `update_policy` run unchanged. The run's reported rewards score every one
of its calls: team -> `Outcome.team`, the agent's own reward (if reported) -> `Outcome.local`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import pstdev
from typing import Any

from teamrl.gateway.sessions import Call
from teamrl.rollout.tree import Episode, RewardWeights, Sample
from teamrl.workflows.base import Outcome


@dataclass
class EpisodeResult:
    """What a program run reports: the team reward, optionally each agent's own, and success."""

    team: float
    agents: dict[str, float] = field(default_factory=dict)
    success: bool | None = None  # None: team reward > 0


MAX_ABS_REWARD = 1e6
"""The largest reward magnitude a program may report. Larger ones (1e308) overflow the advantage
arithmetic (a group's mean and spread) into inf and NaN just as NaN and inf do; a run reporting one is
dropped as `invalid_reward`. Scale rewards into this range (they are normalised per group anyway)."""


class InvalidReward(ValueError):
    """A program reported a reward that is not a finite number within +-MAX_ABS_REWARD."""


def parse_result(value: Any) -> EpisodeResult:
    """A program's return value as an EpisodeResult; InvalidReward for NaN, inf or |reward| > MAX_ABS_REWARD.

    Accepted: a number (the team reward); a mapping with `team` (or `reward`), optional `agents`
    ({agent: reward}) and `success`; a (team, {agent: reward}) pair; an EpisodeResult.

    >>> parse_result(1).team
    1.0
    >>> parse_result({"reward": 0.5, "agents": {"a": 1}}).agents
    {'a': 1.0}
    """
    try:
        result = _read_result(value)
    except OverflowError as err:  # an int beyond float's range
        raise InvalidReward(f"the program reported a reward too large for a float ({err})") from None
    for name, reward in [("team", result.team), *((f"agents.{a}", r) for a, r in result.agents.items())]:
        if not (math.isfinite(reward) and abs(reward) <= MAX_ABS_REWARD):
            raise InvalidReward(
                f"the program reported {name} reward {reward!r}: rewards must be finite numbers "
                f"within +-{MAX_ABS_REWARD:g}"
            )
    return result


def _read_result(value: Any) -> EpisodeResult:
    if isinstance(value, EpisodeResult):
        return EpisodeResult(float(value.team), {str(k): float(v) for k, v in value.agents.items()}, value.success)
    if isinstance(value, bool) or value is None:
        raise ValueError(f"the program returned {value!r}, not a reward")
    if isinstance(value, (int, float)):
        return EpisodeResult(float(value))
    if isinstance(value, tuple) and len(value) == 2:
        return EpisodeResult(float(value[0]), {str(k): float(v) for k, v in dict(value[1]).items()})
    if isinstance(value, Mapping):
        team = value.get("team", value.get("reward"))
        if team is None or isinstance(team, bool):
            raise ValueError(f"the program's result {dict(value)!r} has no numeric `team` (or `reward`) entry")
        success = value.get("success")
        return EpisodeResult(
            float(team),
            {str(k): float(v) for k, v in dict(value.get("agents") or {}).items()},
            None if success is None else bool(success),
        )
    raise ValueError(
        f"the program returned {type(value).__name__}, not a reward; return a number or "
        "{'team': ..., 'agents': {...}}"
    )


@dataclass
class FinishedRun:
    """One run that reported a result: its instance, calls and rewards."""

    instance: int
    calls: list[Call]
    result: EpisodeResult


def to_records(
    runs: list[FinishedRun], roles: dict[str, str], agent_to_policy: dict[str, str], weights: RewardWeights
) -> tuple[list[Sample], list[Episode]]:
    """One Episode per run and one Sample per sampled call (all committed: each is its run's own)."""
    samples = [
        call_sample(call, run.result, e, run.instance, roles, agent_to_policy, weights, committed=True)
        for e, run in enumerate(runs)
        for call in run.calls
    ]
    return samples, [episode_record(run, weights) for run in runs]


def episode_record(run: FinishedRun, weights: RewardWeights) -> Episode:
    """The Episode of one run: its result, and its calls (replayed ones too: they are its history) as transcript."""
    result = run.result
    success = result.success if result.success is not None else result.team > 0
    episode = Episode(run.instance, state=None, team_return=result.team, success=success)
    for call in run.calls:
        reward = weights.team * result.team + weights.local * result.agents.get(call.agent, 0.0)
        episode.transcript.append(
            {"turn": call.index, "agent": call.agent, "text": call.generation.text, "reward": reward}
        )
        episode.rewards_by_agent[call.agent] = reward
    episode.turns = len(run.calls)  # a program's turn is one call: its agents need not take turns in rounds
    return episode


def call_sample(
    call: Call,
    result: EpisodeResult,
    episode: int,
    instance: int,
    roles: dict[str, str],
    agent_to_policy: dict[str, str],
    weights: RewardWeights,
    committed: bool,
) -> Sample:
    """The Sample of one call, scored with the rewards of the run it belongs to."""
    local = result.agents.get(call.agent, 0.0)
    outcome = Outcome(team=result.team, local=local, terms={"team": result.team, "local": local})
    return Sample(
        call.generation,
        outcome,
        weights.combine(outcome),
        episode,
        instance,
        call.index,
        call.agent,
        roles[call.agent],
        agent_to_policy[call.agent],
        committed=committed,
    )


def group_checks(samples: list[Sample]) -> dict[str, float]:
    """Per agent: how many (instance, call index) groups have one sample (no comparison, no signal)
    and how many have rewards that do not vary (advantage 0). `gateway/<agent>/...` metrics."""
    groups: dict[tuple[int, int, str], list[float]] = defaultdict(list)
    for s in samples:
        groups[s.tree_key].append(s.reward)
    out: dict[str, float] = {}
    for (_, _, agent), rewards in groups.items():
        for name, hit in (
            ("groups", True),
            ("singleton_groups", len(rewards) == 1),
            ("zero_variance_groups", len(rewards) > 1 and pstdev(rewards) == 0.0),
        ):
            key = f"gateway/{agent}/{name}"
            out[key] = out.get(key, 0.0) + float(hit)
    return out
