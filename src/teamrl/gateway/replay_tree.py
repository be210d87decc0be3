"""Tree sampling by replay, the bookkeeping (`teamrl.gateway.program` plays the runs): which runs of a level
finished, grouped per instance, and each instance's committed line through its tree (the run committed last
and how many of its calls are committed: the prefix the next level's runs replay)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from teamrl.gateway.grouping import FinishedRun, call_sample
from teamrl.gateway.runs import RunOutcome
from teamrl.gateway.sessions import Call, EpisodeSession
from teamrl.rollout.tree import RewardWeights, Sample, commit_index


def finished_runs(plan: list[int], played: list[tuple[EpisodeSession, RunOutcome]]) -> list[FinishedRun]:
    """The runs that reported a result, with the calls they sampled."""
    return [
        FinishedRun(index, session.sampled_calls(), outcome.result)
        for index, (session, outcome) in zip(plan, played)
        if outcome.result is not None
    ]


def runs_by_instance(
    plan: list[int], played: list[tuple[EpisodeSession, RunOutcome]], exclude: set[int]
) -> dict[int, list[FinishedRun]]:
    """Instance -> its runs of one level that reported a result and replayed their prefix, with all their calls
    (the replayed prefix included); instances in `exclude` left out."""
    runs: dict[int, list[FinishedRun]] = {}
    for index, (session, outcome) in zip(plan, played):
        if outcome.result is not None and not session.mismatches and index not in exclude:
            runs.setdefault(index, []).append(FinishedRun(index, list(session.calls), outcome.result))
    return runs


@dataclass
class CommittedLine:
    """One instance's committed path through its tree: the run committed last and how many of its calls are
    committed (its prefix, which the next level's runs replay)."""

    episode: int  # the index of the instance's Episode among the rollout's episodes
    run: FinishedRun
    depth: int = 0

    def next_key(self) -> tuple[str, int] | None:
        """(agent, call index) of the committed run's first uncommitted call; None when it made no further call."""
        if self.depth >= len(self.run.calls):
            return None
        call = self.run.calls[self.depth]
        return call.agent, call.index

    def prefix(self) -> list[Call]:
        return self.run.calls[: self.depth]

    def commit(
        self,
        runs: list[FinishedRun],
        roles: dict[str, str],
        agent_to_policy: dict[str, str],
        weights: RewardWeights,
        rng: random.Random,
        commit_rule: str,
    ) -> list[Sample]:
        """Score this level's runs by their fresh call at the line's next position (the group: same prefix, so
        the same prompt), commit the best one's run (ties: `rng`) and return the group's Samples."""
        key = self.next_key()
        members = [
            (run, call) for run in runs for call in run.calls if (call.agent, call.index) == key and not call.replayed
        ]
        if not members:  # all of this level's runs were dropped: the line ends on the run committed before
            return []
        group = [
            call_sample(call, run.result, self.episode, run.instance, roles, agent_to_policy, weights, committed=False)
            for run, call in members
        ]
        chosen = commit_index([s.reward for s in group], commit_rule, rng)
        group[chosen].committed = True
        self.run, call = members[chosen]
        self.depth = self.run.calls.index(call) + 1
        return group
