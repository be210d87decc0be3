"""FSDP2 within a policy's actor group: weights, gradients and AdamW state sharded across its workers.

`trainer.shard: fsdp` turns each worker of a policy group (`trainer.data_parallel` of them) into one
rank of a `torch.distributed.fsdp.fully_shard` mesh: every decoder layer is its own FSDP unit, the
rest of the model the root unit. A rank keeps 1/world of every parameter (a DTensor shard on dim 0),
of its gradient and of AdamW's moments; a layer's full weights exist only while the layer runs.

The update itself is `update_policy` unchanged (see `training/data_parallel.py` for how the
minibatch is split): FSDP's reduce-scatter replaces the all-reduce, summing the weighted gradients
(divide factor 1, since the shares are already weighted). Three things differ from plain data
parallelism, and `ShardedGradSync` carries them:

- every rank must run every forward and backward, because each gathers the layer weights from all
  ranks; a rank whose share of a loss part is empty runs a zero-weight pass on one sample of it;
- gradients are already reduced when backward returns (`reduce_gradients` does nothing);
- full tensors are gathered only where a full copy is needed: the trained weights returned to the
  driver after each update (which samples, evaluates and writes HF checkpoints from its copy) and the
  optimizer state pulled before a resumable checkpoint. Both gathers are collectives: every rank
  calls them, rank 0 keeps the result.

The optimizer state a group starts from (a fresh one, or one restored from a checkpoint) arrives
full, in the driver's format; each rank keeps its shard of it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from teamrl.policies.loading import decoder_layers
from teamrl.training.data_parallel import GradSync
from teamrl.training.update import PolicyOptimizer

PARAM_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class ShardedGradSync(GradSync):
    """A rank of an FSDP group: shares are split as in data parallelism, FSDP reduces the gradients."""

    lockstep = True

    def reduce_gradients(self, model: torch.nn.Module) -> None:
        """Nothing to do: FSDP reduce-scattered (summed) every gradient during backward."""


def shard_module(module: torch.nn.Module, mesh: DeviceMesh, param_dtype: str = "float32") -> None:
    """fully_shard every decoder layer of `module`, then the module itself (in place)."""
    precision = MixedPrecisionPolicy(param_dtype=PARAM_DTYPES[param_dtype], reduce_dtype=torch.float32)
    for layer in decoder_layers(module):
        fully_shard(layer, mesh=mesh, mp_policy=precision)
    fully_shard(module, mesh=mesh, mp_policy=precision)
    for unit in module.modules():
        if isinstance(unit, FSDPModule):
            # Sum, not average: each rank's loss share is already weighted (data_parallel.py). Gloo has no
            # pre-multiplied sum, so the factor is applied as a plain sum plus a (here trivial) scaling.
            unit.set_gradient_divide_factor(1.0)
            unit.set_force_sum_reduction_for_comms(True)


def shard_states(
    states: dict[str, PolicyOptimizer], rank: int, world_size: int, device: str, param_dtype: str = "float32"
) -> ShardedGradSync:
    """Shard the networks (once per network: LoRA adapters share theirs) and rebuild each optimizer.

    Needs the process group already joined. Optimizers and schedulers are rebuilt over the sharded
    parameters with their state and learning rates carried over, so a restored run continues exactly.
    """
    mesh = init_device_mesh("cuda" if device.startswith("cuda") else "cpu", (world_size,))
    names_of = {name: _param_names(state) for name, state in states.items()}
    full_states = {name: state.optimizer.state_dict() for name, state in states.items()}
    done: set[int] = set()
    sync = ShardedGradSync(rank, world_size)
    for state in states.values():
        network = state.policy.network
        if id(network) not in done:
            shard_module(network, mesh, param_dtype)
            done.add(id(network))
        reference = state.reference
        if reference is not None and id(reference) not in done and _is_separate_copy(reference, network):
            shard_module(reference, mesh, param_dtype)  # a full policy's frozen copy (LoRA: the base, adapters off)
            done.add(id(reference))
        state.grad_sync = sync
    for name, state in states.items():
        _rebuild_optimizer(state, names_of[name], full_states[name])
    return sync


def _is_separate_copy(module: torch.nn.Module, network: torch.nn.Module) -> bool:
    """True when `module` has parameters, none of them `network`'s (a frozen copy, not a view of it)."""
    theirs = {id(p) for p in network.parameters()}
    mine = [id(p) for p in module.parameters()]
    return bool(mine) and not any(i in theirs for i in mine)


def _param_names(state: PolicyOptimizer) -> list[list[str]]:
    """For each optimizer param group, the network's names of its parameters (in the group's order)."""
    name_of = {id(p): n for n, p in state.policy.network.named_parameters()}
    missing = [p for g in state.optimizer.param_groups for p in g["params"] if id(p) not in name_of]
    if missing:
        raise ValueError(
            f"policy {state.policy.name}: the optimizer holds {len(missing)} tensor(s) that are not "
            "parameters of the policy's network, which FSDP cannot shard"
        )
    return [[name_of[id(p)] for p in g["params"]] for g in state.optimizer.param_groups]


def _rebuild_optimizer(state: PolicyOptimizer, names: list[list[str]], full: dict[str, Any]) -> None:
    """A new optimizer of the same class over the sharded parameters, each rank holding its state shard."""
    params = dict(state.policy.network.named_parameters())
    old = state.optimizer
    groups = [
        {**{k: v for k, v in g.items() if k != "params"}, "params": [params[n] for n in group_names]}
        for g, group_names in zip(old.param_groups, names)
    ]
    optimizer_class: Any = type(old)  # AdamW and friends take (params, **defaults)
    optimizer = optimizer_class(groups)  # each group carries all its settings (lr, betas, weight decay, ...)
    if not isinstance(state.scheduler, torch.optim.lr_scheduler.LambdaLR):
        raise TypeError(
            f"policy {state.policy.name}: FSDP rebuilds LambdaLR schedules (make_optimizer's), "
            f"not {type(state.scheduler).__name__}"
        )
    scheduler_state = state.scheduler.state_dict()
    # The new scheduler's first step rewrites the learning rates; the loads below restore them.
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, state.scheduler.lr_lambdas)
    flat = [p for g in groups for p in g["params"]]
    sharded = {
        index: {key: _shard_like(value, flat[index]) for key, value in slots.items()}
        for index, slots in full["state"].items()
    }
    optimizer.load_state_dict({"state": sharded, "param_groups": full["param_groups"]})
    scheduler.load_state_dict(scheduler_state)
    state.optimizer, state.scheduler = optimizer, scheduler


def _shard_like(value: Any, param: torch.Tensor) -> Any:
    """An optimizer slot (e.g. exp_avg) as the local shard of `param`'s layout; scalars (step) unchanged."""
    if isinstance(param, DTensor) and isinstance(value, torch.Tensor) and value.shape == param.shape:
        return distribute_tensor(
            value.to(param.device_mesh.device_type), param.device_mesh, param.placements, src_data_rank=None
        )  # every rank has the full value: no communication
    return value


def full_tensor(value: Any) -> Any:
    """A CPU copy of `value`, gathered from every rank first when it is a shard (collective)."""
    if isinstance(value, DTensor):
        return value.full_tensor().cpu()
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, dict):
        return {k: full_tensor(v) for k, v in value.items()}
    if isinstance(value, list):
        return [full_tensor(v) for v in value]
    return value


def gather_trained_weights(state: PolicyOptimizer) -> dict[str, torch.Tensor]:
    """Name -> full CPU tensor of every parameter the policy's optimizer trains (collective; every rank)."""
    owned = {id(p) for group in state.optimizer.param_groups for p in group["params"]}
    return {name: full_tensor(p.detach()) for name, p in state.policy.network.named_parameters() if id(p) in owned}


def gather_optimizer_state(state: PolicyOptimizer) -> dict[str, Any]:
    """The optimizer's state_dict with every shard gathered: the format a one-process run saves (collective)."""
    return full_tensor(state.optimizer.state_dict())
