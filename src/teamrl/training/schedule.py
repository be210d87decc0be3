"""Which weights sample which training step: the serial schedule and the pipelined one (`trainer.rollout_schedule`).

Versions count updates: version v is the weights after v updates, so the update of step t turns version
t-1 into version t.

- serial: step t is sampled with version t-1 (by this process, or by the rollout workers, which receive
  each new version before the next step is played), then updated on.
- pipelined (`trainer.rollout_staleness: 1`): the rollout workers play step t+1 while the policies update
  on step t, with the weights they hold then: version t-1 (steps 1 and 2 both with version 0). Every
  sample of an update is one version behind the weights that train on it (none for step 1), and the
  update's rollout correction weights it by pi_prox / mu. Which version samples which step depends
  only on the step number, so a seed gives one run.
- pipelined with `rollout_staleness: 0`: the workers wait for update t before they play step t+1: no
  overlap, and the run equals the serial one with rollout workers (the sampling streams are consumed
  in the same order: rollout t, update t's seeds, rollout t+1).

Each sample carries the version that sampled it (`Sample.weights_version`). A step checkpoint of a
pipelined run holds what replays the rollout already played for the next step: the sampling states it
started from and, when they were not the checkpoint's own weights, the trained tensors that played it.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from teamrl.config import RunConfig
from teamrl.policies.loading import Policy
from teamrl.rollout.agent_params import agent_sampling
from teamrl.rollout.tree import Episode, RewardWeights, Sample, run_episodes
from teamrl.training.backends.rollout_workers import InFlight, RolloutPool, Weights, current_weights
from teamrl.training.checkpoint import CheckpointError
from teamrl.training.update import PolicyOptimizer
from teamrl.workflows.base import Workflow


def episode_request(config: RunConfig, workflow: Workflow, step: int) -> dict[str, Any]:
    """The arguments (besides the sampling streams) of batch `step`'s episodes: tree-sampled (AT-GRPO) or
    K independent ones (trajectory). Batch `step` is instances [step * batch_size, (step + 1) * batch_size)."""
    algo = config.algorithm
    params = agent_sampling(config.rollout, workflow.agents, "train")
    first = step * config.train.batch_size
    instances = list(range(first, first + config.train.batch_size))
    weights = RewardWeights(algo.team_weight, algo.local_weight)
    if algo.grouping == "tree":
        return dict(
            instances=instances, split="train", params=params, branches=algo.k, weights=weights, commit_rule=algo.commit
        )
    repeated = [i for i in instances for _ in range(algo.k)]
    return dict(instances=repeated, split="train", params=params, branches=1, weights=weights)


def rollout_step(
    config: RunConfig,
    workflow: Workflow,
    policies: dict[str, Policy],
    mapping: dict[str, str],
    step: int,
    generator: torch.Generator,
    rng: random.Random,
    pool: RolloutPool | None = None,
) -> tuple[list[Sample], list[Episode]]:
    """One batch of training episodes (`episode_request`), played here or by the rollout workers `pool`."""
    play = pool.run_episodes if pool else partial(run_episodes, workflow, policies=policies, agent_to_policy=mapping)
    return play(**episode_request(config, workflow, step), generator=generator, rng=rng)


@dataclass
class Rollout:
    """One step's episodes, as the schedule hands them to the update."""

    samples: list[Sample]
    episodes: list[Episode]
    seconds: float  # the sampler's time playing them
    waited: float  # the time the training loop waited for them when it took them (`take`)


class SerialSchedule:
    """Sample step t with the current weights, then update (the workers get each new version at once)."""

    def __init__(self, config: RunConfig, workflow: Workflow, policies: dict[str, Policy], mapping: dict[str, str]):
        self.config, self.workflow, self.policies, self.mapping = config, workflow, policies, mapping
        self.pool: RolloutPool | None = None

    def begin(
        self,
        pool: RolloutPool | None,
        optimizers: dict[str, PolicyOptimizer],
        generator: torch.Generator,
        rng: random.Random,
        version: int,
    ) -> None:
        """Start sampling from weights version `version` (the restored step) with these streams."""
        self.pool, self.generator, self.rng = pool, generator, rng

    def take(self, step: int) -> Rollout:
        started = time.time()
        samples, episodes = rollout_step(
            self.config, self.workflow, self.policies, self.mapping, step - 1, self.generator, self.rng, self.pool
        )
        if self.pool is None:  # the workers stamp their own
            for sample in samples:
                sample.weights_version = step - 1
        seconds = time.time() - started
        return Rollout(samples, episodes, seconds, seconds)

    def before_update(self, step: int) -> None:
        """Nothing runs beside a serial update."""

    def after_update(self, step: int, optimizers: dict[str, PolicyOptimizer]) -> None:
        if self.pool:
            self.pool.sync(optimizers, step)  # the driver's policies hold version `step`; the workers get it

    def settle(self) -> float:
        """Nothing is in flight between serial steps; returns the seconds waited (0)."""
        return 0.0


@dataclass
class _Played:
    """A rollout started on the workers, with what replays it (its step, the version and weights that
    played it, the sampling states it started from)."""

    step: int
    version: int
    weights: Weights
    generator_state: torch.Tensor
    rng_state: Any
    flight: InFlight | None = None
    rollout: Rollout | None = None


class PipelinedSchedule:
    """The rollout workers play step t+1 during step t's update (staleness 1), or right after it (0).

    Also a checkpoint component (`state_dict` / `load_state_dict`): the next step's rollout, to replay.
    """

    def __init__(self, config: RunConfig, workflow: Workflow):
        self.config, self.workflow = config, workflow
        self.staleness, self.last = config.trainer.rollout_staleness, config.train.steps
        self.played: _Played | None = None
        self.restored: dict[str, Any] | None = None

    def begin(
        self,
        pool: RolloutPool | None,
        optimizers: dict[str, PolicyOptimizer],
        generator: torch.Generator,
        rng: random.Random,
        version: int,
    ) -> None:
        """Start from weights version `version` (the restored step), which the workers were built with."""
        if pool is None:
            raise ValueError("the pipelined schedule samples on rollout workers: trainer.rollout_workers >= 1")
        self.pool, self.generator, self.rng = pool, generator, rng
        self.held, self.held_version = current_weights(optimizers), version  # what the workers sample with

    def take(self, step: int) -> Rollout:
        """Step `step`'s rollout: played during the previous step, or now (the first step, a resumed run)."""
        started, waited = time.time(), self.played is None
        if self.played is None:
            if self.restored:
                self._replay(step)
            else:
                self._start(step)
                self.settle()
        played, self.played = self.played, None
        assert played is not None and played.rollout is not None and played.step == step
        played.rollout.waited = time.time() - started if waited else 0.0
        return played.rollout

    def before_update(self, step: int) -> None:
        if self.staleness == 1 and step < self.last:
            self._start(step + 1)  # with the workers' weights, version step - 2 (0 for the first two steps)

    def after_update(self, step: int, optimizers: dict[str, PolicyOptimizer]) -> None:
        self.held, self.held_version = current_weights(optimizers), step
        self.pool.send(self.held, step)  # loaded after the shard in flight, before the next one
        if self.staleness == 0 and step < self.last:
            self._start(step + 1)

    def settle(self) -> float:
        """Wait for the rollout in flight (and the weights sent since); returns the seconds waited here."""
        started = time.time()
        played = self.played
        if played is not None and played.flight is not None:
            samples, episodes, seconds = played.flight.result()
            played.flight = None
            played.rollout = Rollout(samples, episodes, seconds, 0.0)
        self.pool.wait_loaded()
        return time.time() - started

    def _start(self, step: int) -> None:
        """Hand step `step` to the workers, from the loop's sampling streams as they are now."""
        generator_state, rng_state = self.generator.get_state(), self.rng.getstate()
        flight = self.pool.start_episodes(
            **episode_request(self.config, self.workflow, step - 1), generator=self.generator, rng=self.rng
        )
        self.played = _Played(step, self.held_version, self.held, generator_state, rng_state, flight)

    def _replay(self, step: int) -> None:
        """Play again the rollout the checkpoint recorded, with its weights and streams; then check that
        the streams end where the checkpoint left them (the replay was exact)."""
        saved, self.restored = self.restored, None
        assert saved is not None
        if saved["step"] != step:
            raise CheckpointError(f"the checkpoint's pending rollout is for step {saved['step']}, not {step}")
        after = self.generator.get_state(), self.rng.getstate()
        current, version = self.held, self.held_version
        if saved["weights"] is not None:
            self.pool.send(saved["weights"], saved["version"])
            self.held, self.held_version = saved["weights"], saved["version"]
        self.generator.set_state(saved["generator"])
        self.rng.setstate(saved["rng"])
        self._start(step)
        self.settle()
        if saved["weights"] is not None:
            self.held, self.held_version = current, version
            self.pool.send(current, version)
        if not (torch.equal(self.generator.get_state(), after[0]) and self.rng.getstate() == after[1]):
            raise CheckpointError(
                f"replaying step {step}'s rollout did not end at the checkpoint's sampling state: the rollout "
                "is not reproducible here (a different teamrl or torch, or a nondeterministic task)"
            )

    def state_dict(self) -> dict[str, Any]:
        """The next step's rollout to replay: its step, the streams it started from, the weights that played
        it (None: the checkpoint's own); empty when none was started (the last step)."""
        played = self.played
        if played is None:
            return {}
        return {
            "step": played.step,
            "version": played.version,
            "weights": played.weights if played.version != self.held_version else None,
            "generator": played.generator_state,
            "rng": played.rng_state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.restored = state or None


Schedule = SerialSchedule | PipelinedSchedule


def make_schedule(
    config: RunConfig, workflow: Workflow, policies: dict[str, Policy], mapping: dict[str, str]
) -> Schedule:
    """The schedule `trainer.rollout_schedule` names."""
    if config.trainer.rollout_schedule == "pipelined":
        return PipelinedSchedule(config, workflow)
    return SerialSchedule(config, workflow, policies, mapping)
