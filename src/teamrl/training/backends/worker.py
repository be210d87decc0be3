"""A Ray actor holding policies' optimizers: one rank of a policy group's data-parallel workers.

Policies that share one network in memory (LoRA adapters on one base) live in one worker, so the
base is shipped and held once; their updates then run one after another inside it.
"""

from __future__ import annotations

import io
import socket
from typing import Any

import torch

from teamrl.rollout.tree import Sample
from teamrl.setup.threads import set_threads
from teamrl.training.backends.base import PolicyUpdate, UpdateSettings, load_tracker_states, run_update, tracker_states
from teamrl.training.data_parallel import init_group
from teamrl.training.update import PolicyOptimizer


def pack(obj: Any) -> bytes:
    """Serialise policies/optimizers (closures included) so that tensors can be re-mapped on load."""
    import ray.cloudpickle

    buffer = io.BytesIO()
    torch.save(obj, buffer, pickle_module=ray.cloudpickle)
    return buffer.getvalue()


def unpack(data: bytes, device: str) -> Any:
    """The object `pack` wrote, every tensor on `device` (a GPU actor sees its GPU as cuda:0)."""
    return torch.load(io.BytesIO(data), map_location=device, weights_only=False)


def trained_weights(state: PolicyOptimizer) -> dict[str, torch.Tensor]:
    """Name -> CPU copy of every tensor the policy's optimizer updates (a LoRA policy: its adapter)."""
    owned = {id(p) for group in state.optimizer.param_groups for p in group["params"]}
    return {name: p.detach().cpu().clone() for name, p in state.policy.network.named_parameters() if id(p) in owned}


def load_weights(network: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Copy `weights` (name -> tensor) into the matching parameters of `network`, in place."""
    params = dict(network.named_parameters())
    missing = sorted(set(weights) - set(params))
    if missing:
        raise KeyError(f"weights for parameters the network does not have: {', '.join(missing[:5])}")
    with torch.no_grad():
        for name, value in weights.items():
            params[name].copy_(value)


class PolicyWorker:
    """Holds some policies' PolicyOptimizers; runs their updates (made a Ray actor by RayBackend)."""

    def __init__(self, payload: bytes, device: str, num_threads: int, settings: UpdateSettings) -> None:
        # Actors on one machine split its cores: without this each would start a thread per core.
        # Within its share, `auto`: no more threads than the cores other processes leave free.
        set_threads("auto", cap=max(1, num_threads))
        self.device, self.settings = device, settings
        self.states: dict[str, PolicyOptimizer] = unpack(payload, device)
        factory = settings.tracker_factory
        self.trackers = {name: factory(name, state) if factory else None for name, state in self.states.items()}
        self.rank = 0
        self.sharded = False

    def rendezvous(self) -> tuple[str, int]:
        """This worker's address and a free port, where the data-parallel group meets."""
        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            return ray.util.get_node_ip_address(), s.getsockname()[1]

    def join(
        self, rank: int, world_size: int, address: str, port: int, shard: str = "none", param_dtype: str = "float32"
    ) -> None:
        """Join the policy group's torch.distributed group (gloo on CPU, nccl on GPU).

        shard: fsdp also shards this worker's policies across the group (training/backends/fsdp.py).
        """
        backend = "nccl" if self.device.startswith("cuda") else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(0)
        sync = init_group(rank, world_size, address, port, backend)
        self.rank = rank
        # Per-role trackers would see only this worker's share of each role's gradient.
        self.trackers = {name: None for name in self.states}
        if shard == "fsdp":
            from teamrl.training.backends.fsdp import shard_states

            self.sharded = True
            shard_states(self.states, rank, world_size, self.device, param_dtype)
            return
        for state in self.states.values():
            state.grad_sync = sync

    def update(
        self, batches: dict[str, list[Sample]], seeds: dict[str, int]
    ) -> dict[str, tuple[PolicyUpdate, dict[str, torch.Tensor] | None]]:
        """Each policy's update; rank 0 also returns the new trained weights for the driver."""
        out = {}
        for name, samples in batches.items():
            result = run_update(self.states[name], samples, seeds[name], self.settings, self.trackers[name])
            weights = self._gather(name, "weights") if self.sharded or self.rank == 0 else None
            out[name] = (result, weights if self.rank == 0 else None)
        return out

    def _gather(self, name: str, what: str) -> Any:
        """Policy `name`'s trained weights or optimizer state, full, on CPU (collective when sharded)."""
        state = self.states[name]
        if self.sharded:
            from teamrl.training.backends.fsdp import gather_optimizer_state, gather_trained_weights

            return gather_trained_weights(state) if what == "weights" else gather_optimizer_state(state)
        return trained_weights(state) if what == "weights" else _to_cpu(state.optimizer.state_dict())

    def tracker_states(self) -> dict[str, dict]:
        """Each policy's per-role gradient tracker state (none under data parallelism)."""
        return tracker_states(self.trackers)

    def load_tracker_states(self, states: dict[str, dict]) -> None:
        load_tracker_states(self.trackers, states)

    def optimizer_states(self) -> dict[str, tuple[dict, dict]] | None:
        """Each policy's optimizer and scheduler state_dicts (tensors on CPU) on rank 0; None elsewhere.

        Every rank of a sharded group must be called: the state is gathered from all of them.
        """
        if not self.sharded and self.rank != 0:
            return None
        states = {
            name: (self._gather(name, "optimizer"), state.scheduler.state_dict()) for name, state in self.states.items()
        }
        return states if self.rank == 0 else None

    def peak_rss_mb(self, reset: bool = False) -> float:
        """This process's peak resident memory so far in MiB (Linux); reset: start a new peak from now."""
        from teamrl.training.backends.memory import peak_rss_mb

        return peak_rss_mb(reset)


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_cpu(v) for v in value]
    return value
