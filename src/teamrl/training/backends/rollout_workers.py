"""Rollout workers: Ray actors that play a step's episodes, environment and verifier work included.

With `trainer.rollout_workers: N` (and `backend: ray`) each of N actors builds the workflow from the
run's config, so its environment steps and verifier calls (the code sandbox, ...) run in the actor's
process, and holds its own copy of the policies, shipped once from the driver. A step's instances
are split into N contiguous shards and every actor runs the same `run_episodes` on its shard.

Sampling state is passed explicitly. With N = 1 the actor receives the driver's torch.Generator and
random.Random states and hands the advanced states back, so the run is the driver-only run. With
N > 1 one seed is drawn from the loop's RNG per step and every shard gets its own generator and
tie-break RNG derived from (that seed, shard index): the run is deterministic for a seed and N (and
resumes exactly, the loop's RNG being checkpointed) but differs from the N = 1 run.

After every update `sync` ships each policy's trained tensors (a LoRA policy: only its adapter) to
every actor, put into Ray's object store once and shared, with the weights version they are (the
trainer's count of updates); each actor stamps the samples it plays with the version it holds.
`start_episodes` hands a shard to each actor and returns at once (the pipelined schedule updates
meanwhile); `InFlight.result` waits for the samples.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from teamrl.config import ConfigError, RunConfig
from teamrl.policies.loading import Policy
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import Episode, RewardWeights, Sample, run_episodes
from teamrl.setup.threads import set_threads
from teamrl.training.backends.worker import load_weights, pack, trained_weights, unpack
from teamrl.training.update import PolicyOptimizer

# (samples, episodes, generator state, random.Random state, seconds the shard took) of one shard.
ShardResult = tuple[list[Sample], list[Episode], torch.Tensor, Any, float]
# policy name -> parameter name -> tensor: the trained tensors of one weights version
Weights = dict[str, dict[str, torch.Tensor]]


class RolloutWorker:
    """Holds a workflow and copies of the policies; plays shards of episodes (a Ray actor)."""

    def __init__(
        self, config: RunConfig, payload: bytes, mapping: dict[str, str], num_threads: int, version: int = 0
    ) -> None:
        from teamrl.setup.team import build_workflow

        # Rollout actors on one machine split its cores: without this each starts a thread per core.
        # train.threads within that share (`auto`: only cores other processes leave free).
        set_threads(config.train.threads, cap=max(1, num_threads))
        self.workflow = build_workflow(config)
        self.policies: dict[str, Policy] = unpack(payload, "cpu")
        self.mapping = mapping
        self.version = version

    def load(self, weights: Weights, version: int) -> None:
        """Copy each policy's trained tensors (name -> tensor) into this worker's copy of it."""
        for name, tensors in weights.items():
            load_weights(self.policies[name].network, tensors)
        self.version = version

    def weights_version(self) -> int:
        """The version of the weights this worker samples with."""
        return self.version

    def play(
        self,
        instances: list[int],
        split: str,
        params: SamplingParams | Mapping[str, SamplingParams],
        branches: int,
        weights: RewardWeights,
        generator_state: torch.Tensor,
        rng_state: Any,
        commit_rule: str,
    ) -> ShardResult:
        """`run_episodes` on `instances` from the given sampling states; returns the advanced states too."""
        started = time.perf_counter()
        generator = torch.Generator().set_state(generator_state)
        rng = random.Random()
        rng.setstate(rng_state)
        samples, episodes = run_episodes(
            self.workflow,
            instances,
            split,
            self.policies,
            self.mapping,
            params,
            branches,
            weights,
            generator,
            rng,
            commit_rule,
        )
        for sample in samples:
            sample.weights_version = self.version
        return samples, episodes, generator.get_state(), rng.getstate(), time.perf_counter() - started


def shards(items: list[int], count: int) -> list[list[int]]:
    """`items` cut into `count` contiguous pieces whose lengths differ by at most one (some may be empty)."""
    size, extra = divmod(len(items), count)
    bounds = [0]
    for index in range(count):
        bounds.append(bounds[-1] + size + (index < extra))
    return [items[bounds[i] : bounds[i + 1]] for i in range(count)]


def shard_states(seed: int, shard: int) -> tuple[torch.Tensor, Any]:
    """The generator and tie-break RNG states of one shard of a step with N > 1 workers."""
    derived = random.Random(f"{seed}/{shard}")  # str seeding hashes the text: stable across runs
    generator = torch.Generator().manual_seed(derived.getrandbits(63))
    return generator.get_state(), random.Random(derived.getrandbits(63)).getstate()


def _check_cpus(config: RunConfig, groups: int, available: dict[str, float]) -> None:
    """Refuse more CPUs than the cluster has for update groups plus rollout workers (Ray would hang)."""
    trainer = config.trainer
    need = groups * trainer.num_cpus_per_policy + trainer.rollout_workers * trainer.num_cpus_per_rollout_worker
    have = available.get("CPU", 0.0)
    if need > have + 1e-9:
        raise ConfigError(
            f"{groups} policy actor group(s) x trainer.num_cpus_per_policy = {trainer.num_cpus_per_policy} plus "
            f"{trainer.rollout_workers} rollout worker(s) x trainer.num_cpus_per_rollout_worker = "
            f"{trainer.num_cpus_per_rollout_worker} need {need:g} CPUs but the Ray cluster has {have:g}; "
            "lower them (fractions are allowed) or add nodes"
        )


@dataclass
class InFlight:
    """A step's episodes being played by the workers (`RolloutPool.start_episodes`)."""

    futures: list[Any]  # one Ray object ref per non-empty shard
    generator: torch.Generator
    rng: random.Random
    continues_streams: bool  # one worker: it drew from the driver's streams, which continue from its states

    def result(self) -> tuple[list[Sample], list[Episode], float]:
        """Wait for every shard: (samples, episodes in instance order, the slowest shard's seconds).

        One worker: the driver's generator and rng continue from the states it handed back.
        """
        import ray

        samples: list[Sample] = []
        episodes: list[Episode] = []
        results: list[ShardResult] = ray.get(self.futures)
        for shard_samples, shard_episodes, _, _, _ in results:
            for s in shard_samples:  # episode indices are per shard; make them index the whole batch
                s.episode += len(episodes)
            samples += shard_samples
            episodes += shard_episodes
        if self.continues_streams:
            _, _, gen_state, rng_state, _ = results[0]
            self.generator.set_state(gen_state)
            self.rng.setstate(rng_state)
        return samples, episodes, max((r[4] for r in results), default=0.0)


class RolloutPool:
    """N RolloutWorker actors; `run_episodes` mirrors the driver's call without workflow and policies.

    version: the weights version of `policies` (a resumed run's step), which the workers start with.
    """

    def __init__(
        self, config: RunConfig, policies: dict[str, Policy], mapping: dict[str, str], version: int = 0
    ) -> None:
        import ray

        trainer = config.trainer
        cpus = trainer.num_cpus_per_rollout_worker
        _check_cpus(config, len({id(p.network) for p in policies.values()}), ray.cluster_resources())
        actor = ray.remote(num_cpus=cpus)(RolloutWorker)
        payload = ray.put(pack(policies))  # one pickle: LoRA policies keep sharing their base
        self.workers = [
            actor.remote(config, payload, mapping, int(max(1, cpus)), version) for _ in range(trainer.rollout_workers)
        ]
        self.loading: list[Any] = []  # weights being loaded (`send`); a worker loads them before its next shard

    def start_episodes(
        self,
        instances: list[int],
        split: str,
        params: SamplingParams | Mapping[str, SamplingParams],
        branches: int,
        weights: RewardWeights,
        generator: torch.Generator,
        rng: random.Random,
        commit_rule: str = "greedy",
    ) -> InFlight:
        """Hand `instances` to the workers, one contiguous shard each, and return without waiting.

        One worker continues the driver's `generator` and `rng` (they advance when the result is
        taken); several draw one seed from `rng` now and sample each shard from states derived from
        it (see the module doc).
        """
        pieces = shards(instances, len(self.workers))
        if len(self.workers) == 1:
            states = [(generator.get_state(), rng.getstate())]
        else:
            seed = rng.getrandbits(63)
            states = [shard_states(seed, index) for index in range(len(pieces))]
        futures = [
            worker.play.remote(piece, split, params, branches, weights, gen, state, commit_rule)
            for worker, piece, (gen, state) in zip(self.workers, pieces, states)
            if piece
        ]
        return InFlight(futures, generator, rng, len(self.workers) == 1)

    def run_episodes(
        self,
        instances: list[int],
        split: str,
        params: SamplingParams | Mapping[str, SamplingParams],
        branches: int,
        weights: RewardWeights,
        generator: torch.Generator,
        rng: random.Random,
        commit_rule: str = "greedy",
    ) -> tuple[list[Sample], list[Episode]]:
        """Play `instances` on the workers and wait: `start_episodes(...).result()` without the seconds."""
        flight = self.start_episodes(instances, split, params, branches, weights, generator, rng, commit_rule)
        samples, episodes, _ = flight.result()
        return samples, episodes

    def send(self, weights: Weights, version: int) -> None:
        """Queue `weights` (version `version`) on every worker, behind any shard it is playing; no wait."""
        import ray

        ref = ray.put(weights)
        self.loading += [worker.load.remote(ref, version) for worker in self.workers]

    def wait_loaded(self) -> None:
        """Wait until every worker has loaded the weights `send` queued (errors surface here)."""
        import ray

        loading, self.loading = self.loading, []
        ray.get(loading)

    def sync(self, optimizers: dict[str, PolicyOptimizer], version: int = 0) -> None:
        """Ship every policy's trained tensors (the driver's, just updated) to every worker and wait."""
        self.send(current_weights(optimizers), version)
        self.wait_loaded()

    def versions(self) -> list[int]:
        """Each worker's weights version, after the weights queued so far are loaded."""
        import ray

        return list(ray.get([worker.weights_version.remote() for worker in self.workers]))

    def close(self) -> None:
        """Stop the actors (Ray itself is stopped by the update backend that started it)."""
        import ray

        for worker in self.workers:
            ray.kill(worker)
        self.workers = []


def current_weights(optimizers: dict[str, PolicyOptimizer]) -> Weights:
    """A CPU copy of every policy's trained tensors (a LoRA policy: its adapter), as `send` ships them."""
    return {name: trained_weights(state) for name, state in optimizers.items()}
