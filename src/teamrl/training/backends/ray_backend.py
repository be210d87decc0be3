"""The Ray backend: each policy (or each base shared by LoRA adapters) is a Ray actor group.

A group is `trainer.data_parallel` PolicyWorker actors with `num_cpus_per_policy` /
`num_gpus_per_policy` split among them; the groups of different policies update in parallel. The
actors start from the driver's own PolicyOptimizers (weights, optimizer and scheduler state,
frozen reference), shipped once, so they begin exactly where a single-process run would. After
every update rank 0 of each group returns the trained tensors (a LoRA policy: only its adapter),
which are copied into the driver's policies: those sample the next rollout and are evaluated and
checkpointed as in the local backend.

Ray is found through `trainer.ray_address`, else the RAY_ADDRESS environment variable (an existing
cluster, e.g. one started with `ray start --head`), else a local Ray is started and stopped here.
"""

from __future__ import annotations

import os
from typing import Any

from teamrl.config import ConfigError, TrainerConfig
from teamrl.rollout.tree import Sample
from teamrl.training.backends.base import PolicyUpdate, UpdateSettings
from teamrl.training.backends.worker import PolicyWorker, load_weights, pack
from teamrl.training.update import PolicyOptimizer

LOCAL_RAY: dict[str, Any] = {
    "include_dashboard": False,
    "log_to_driver": False,
    "_system_config": {"worker_niceness": 0},
}
"""How teamrl starts a local Ray. Ray runs its worker processes at niceness 15, below the driver; here the
actors do the run's work (the updates, the pipeline's sampling), so beside any other busy process they would
get a core only when nothing else wants it (a pipelined run's two actors got 76 CPU seconds in 20 minutes
beside two training processes on 2 cores). Worker niceness 0 keeps them at the driver's priority. A cluster
started elsewhere keeps its own setting (`RAY_worker_niceness=0 ray start --head` gives the same)."""


def connect(address: str = "") -> bool:
    """Attach to Ray: the running one, `address`, RAY_ADDRESS, or a new local one. True if started here."""
    try:
        import ray
    except ImportError as err:
        raise ConfigError("trainer.backend: ray needs Ray; install it with pip install 'teamrl[ray]'") from err
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS", "")
    if address:
        ray.init(address=address, log_to_driver=False)
        return False
    ray.init(**LOCAL_RAY)
    return True


def network_groups(optimizers: dict[str, PolicyOptimizer]) -> list[list[str]]:
    """Policy names grouped by the network object they live in (LoRA adapters of one base together)."""
    groups: dict[int, list[str]] = {}
    for name, state in optimizers.items():
        groups.setdefault(id(state.policy.network), []).append(name)
    return list(groups.values())


def _check_resources(groups: int, trainer: TrainerConfig, available: dict[str, float]) -> None:
    """Refuse a request Ray could never place (its actors would wait forever)."""
    for key, per_group, option in (
        ("CPU", trainer.num_cpus_per_policy, "num_cpus_per_policy"),
        ("GPU", trainer.num_gpus_per_policy, "num_gpus_per_policy"),
    ):
        have = available.get(key, 0.0)
        if groups * per_group > have + 1e-9:
            raise ConfigError(
                f"trainer.{option} = {per_group} for {groups} actor group(s) needs {groups * per_group:g} "
                f"{key}s but the Ray cluster has {have:g}; lower trainer.{option} (fractions are allowed) "
                "or add nodes"
            )
    if (
        trainer.num_gpus_per_policy
        and trainer.data_parallel > 1
        and trainer.num_gpus_per_policy / trainer.data_parallel < 1
    ):
        raise ConfigError(
            "trainer.data_parallel > 1 on GPUs needs a whole GPU per worker (nccl cannot run two "
            "ranks on one GPU): set num_gpus_per_policy >= data_parallel"
        )


class RayBackend:
    """Per-policy actor groups on Ray; see the module docstring."""

    def __init__(
        self, optimizers: dict[str, PolicyOptimizer], settings: UpdateSettings, trainer: TrainerConfig
    ) -> None:
        import ray

        self.optimizers = optimizers
        self.started = connect(trainer.ray_address)
        world = trainer.data_parallel
        cpus, gpus = trainer.num_cpus_per_policy / world, trainer.num_gpus_per_policy / world
        device = "cuda:0" if gpus > 0 else "cpu"
        actor = ray.remote(num_cpus=cpus, num_gpus=gpus)(PolicyWorker)
        self.groups: list[tuple[list[str], list[Any]]] = []
        groups = network_groups(optimizers)
        _check_resources(len(groups), trainer, ray.cluster_resources())
        for names in groups:
            payload = ray.put(pack({name: optimizers[name] for name in names}))
            workers = [actor.remote(payload, device, int(max(1, cpus)), settings) for _ in range(world)]
            self.groups.append((names, workers))
        if world > 1 or trainer.shard == "fsdp":
            self._form_process_groups(world, trainer.shard, trainer.shard_param_dtype)

    def _form_process_groups(self, world: int, shard: str, param_dtype: str) -> None:
        import ray

        joins = []
        for _, workers in self.groups:
            address, port = ray.get(workers[0].rendezvous.remote())
            joins += [w.join.remote(rank, world, address, port, shard, param_dtype) for rank, w in enumerate(workers)]
        ray.get(joins)

    def update(self, batches: dict[str, list[Sample]], seeds: dict[str, int]) -> dict[str, PolicyUpdate]:
        """Every group's update at once; the driver's policies get the new weights."""
        import ray

        pending = []
        for names, workers in self.groups:
            mine = {name: batches[name] for name in names if batches.get(name)}
            if mine:
                ref = ray.put(mine)
                pending.append([w.update.remote(ref, seeds) for w in workers])
        results: dict[str, PolicyUpdate] = {}
        for futures in pending:
            rank0 = ray.get(futures)[0]  # waits for every rank: an error on any rank surfaces here
            for name, (result, weights) in rank0.items():
                load_weights(self.optimizers[name].policy.network, weights)
                results[name] = result
        return {name: results[name] for name in self.optimizers if name in results}

    def pull_optimizer_state(self) -> None:
        """Copy each actor's optimizer and scheduler state into the driver's PolicyOptimizers."""
        import ray

        for _, workers in self.groups:
            # every rank is asked: a sharded group gathers the state from all of them (rank 0 returns it)
            rank0 = ray.get([w.optimizer_states.remote() for w in workers])[0]
            for name, (optimizer, scheduler) in rank0.items():
                self.optimizers[name].optimizer.load_state_dict(optimizer)
                self.optimizers[name].scheduler.load_state_dict(scheduler)

    def tracker_states(self) -> dict[str, dict]:
        """The per-role gradient trackers' states, from each group's first actor."""
        import ray

        states: dict[str, dict] = {}
        for states_of_group in ray.get([workers[0].tracker_states.remote() for _, workers in self.groups]):
            states.update(states_of_group)
        return states

    def load_tracker_states(self, states: dict[str, dict]) -> None:
        import ray

        ray.get(
            [
                w.load_tracker_states.remote({n: states[n] for n in names if n in states})
                for names, workers in self.groups
                for w in workers
            ]
        )

    def close(self) -> None:
        """Stop the actors, and Ray itself when this backend started it."""
        import ray

        for _, workers in self.groups:
            for w in workers:
                ray.kill(w)
        self.groups = []
        if self.started:
            ray.shutdown()
