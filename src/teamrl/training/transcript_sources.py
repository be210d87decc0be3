"""Producers of transcript files: a strong scripted team, or a trained run's checkpoint.

Both play training-split episodes and record every turn's rendered prompt, response and committed
reward. A checkpoint's episodes are sampled by the rollout driver, then replayed through a fresh
state with the recorded answers, which gives each turn's prompt exactly as the agent saw it
(parallel workflows included: `play_episode` renders a turn before applying any of its answers).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch

from teamrl.config import ConfigError, RunConfig
from teamrl.demos.driver import Respond, play_episode
from teamrl.demos.strong import replay, strong_team
from teamrl.rollout.agent_params import agent_sampling
from teamrl.rollout.tree import RewardWeights, run_episodes
from teamrl.setup.team import agent_mapping, build_workflow, policies_from_checkpoint
from teamrl.training.transcript_file import TurnRecord
from teamrl.workflows.base import Workflow


class _Recording:
    """A workflow whose `apply` also records the committed reward of every answer (team + local)."""

    def __init__(self, workflow: Workflow, weights: RewardWeights) -> None:
        self._workflow, self._weights = workflow, weights
        self.rewards: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._workflow, name)

    def apply(self, agent: str, state: Any, response: str) -> Any:
        outcome = self._workflow.apply(agent, state, response)
        self.rewards.append(self._weights.combine(outcome))
        return outcome


def record_episode(
    config: RunConfig,
    workflow: Workflow,
    instance: int,
    episode: int,
    respond: Respond,
    rng: random.Random,
    source: str,
    policy_of: dict[str, str],
) -> list[TurnRecord]:
    """Play training instance `instance` with `respond`; one record per turn."""
    recording = _Recording(workflow, RewardWeights(config.algorithm.team_weight, config.algorithm.local_weight))
    state = workflow.new_state("train", instance)
    played = list(play_episode(recording, state, respond, rng))
    success = bool(workflow.success(state))
    roles = {a.name: a.role for a in workflow.agents}
    turns: dict[str, int] = {}
    records = []
    for (agent, prompt, response), reward in zip(played, recording.rewards):
        turns[agent] = turns.get(agent, -1) + 1
        records.append(
            TurnRecord(
                source,
                config.task["name"],
                "train",
                instance,
                episode,
                turns[agent],
                agent,
                roles[agent],
                policy_of.get(agent, ""),
                prompt,
                response,
                float(reward),
                success,
            )
        )
    return records


def _keep(records: list[TurnRecord], only_successes: bool) -> list[TurnRecord]:
    """The records to write: an empty response (a sampled immediate EOS) teaches nothing and the
    format refuses it, so it is left out even when its episode is kept."""
    return [r for r in records if (r.success or not only_successes) and r.response]


def scripted_transcripts(
    config: RunConfig, episodes: int, only_successes: bool = False, first: int = 0
) -> list[TurnRecord]:
    """`episodes` episodes of the task's strong scripted team on training instances first, first+1, ..."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
    workflow = build_workflow(config)
    try:
        respond = strong_team(config.task["name"], workflow)
    except ValueError as err:  # bad input (a task without one), so the CLI's one-line error
        raise ConfigError(str(err)) from err
    rng = random.Random(config.seed)
    records: list[TurnRecord] = []
    for episode in range(episodes):
        records += _keep(
            record_episode(config, workflow, first + episode, episode, respond, rng, "scripted:strong", {}),
            only_successes,
        )
    return records


def checkpoint_folder(source: Path) -> Path:
    """The checkpoint to sample: RUN_DIR/checkpoints/best for a run directory, else `source` itself."""
    if not source.exists():
        raise FileNotFoundError(
            f"--from {source} does not exist; give a run directory written by `teamrl "
            "train` or `teamrl sft`, a checkpoint folder in it, or 'scripted'"
        )
    best = source / "checkpoints" / "best"
    return best if best.is_dir() else source


def run_transcripts(
    config: RunConfig, source: Path, episodes: int, only_successes: bool = True, first: int = 0
) -> list[TurnRecord]:
    """`episodes` episodes of a trained checkpoint on training instances (sampled at the training
    temperature, one per instance), replayed to record each turn."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
    folder = checkpoint_folder(source)
    workflow = build_workflow(config)
    policies, mapping = policies_from_checkpoint(config, workflow, folder)
    sampling = agent_sampling(config.rollout, workflow.agents, "train")
    generator, rng = torch.Generator().manual_seed(config.seed), random.Random(config.seed)
    _, played = run_episodes(
        workflow,
        list(range(first, first + episodes)),
        "train",
        policies,
        mapping,
        sampling,
        1,
        RewardWeights(),
        generator,
        rng,
    )
    records: list[TurnRecord] = []
    for episode, ep in enumerate(played):
        texts: dict[str, list[str]] = {}
        for entry in ep.transcript:
            texts.setdefault(entry["agent"], []).append(entry["text"])
        records += _keep(
            record_episode(
                config,
                workflow,
                ep.instance,
                episode,
                replay(texts),
                rng,
                f"run:{folder}",
                agent_mapping(config, workflow),
            ),
            only_successes,
        )
    return records
