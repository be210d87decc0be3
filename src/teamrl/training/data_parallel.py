"""Data parallelism within one policy: several workers share each minibatch, gradients all-reduced.

Every worker of a group holds the same weights and the same optimizer state, receives the *same*
samples and the same shuffling seed, so `update_policy` forms the same minibatches and the same
loss parts everywhere. Each worker then scores only its contiguous share of every part and the
gradients are summed with one `torch.distributed.all_reduce` per minibatch (gloo on CPU, nccl on
GPUs). Identical gradients on every worker mean identical clipping and identical optimizer steps,
so the replicas never drift apart.

Why the shares are weighted: a part's loss is an aggregation (a mean over tokens, or over
sequences) of per-token terms, times the part's weight in the minibatch. A worker's share is that
aggregation over its samples only, so its weight is the part's weight times the share's fraction of
the part's units (tokens for token-mean, sequences for the sequence means). The summed gradients
are then exactly the gradient of the whole minibatch's loss, whatever the sizes of the shares.
(Plain DDP averages gradients, which is only right when every share has equal weight.)
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

from teamrl.rollout.tree import Sample


def share_bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """[start, end) of worker `rank`'s contiguous share of n items (sizes differ by at most one)."""
    return n * rank // world_size, n * (rank + 1) // world_size


class GradSync:
    """One worker's part in a data-parallel group; `update_policy` calls it for every minibatch.

    Needs an initialised torch.distributed process group (see `init_group`).
    """

    lockstep = False
    """True when every worker must run every part's forward and backward, even with an empty share
    (FSDP: each forward gathers the weights from all workers); such a worker runs a zero-weight pass."""

    def __init__(self, rank: int, world_size: int) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside a group of {world_size} workers")
        self.rank, self.world_size = rank, world_size

    def shard(
        self, part: list[Sample], weight: float, units: Callable[[list[Sample]], float]
    ) -> tuple[list[Sample], float]:
        """This worker's share of a loss part and the share's weight in the minibatch's loss.

        `weight` is the whole part's weight, `units` what the loss aggregation averages over. The
        share may be empty (a part with fewer samples than workers): the worker skips it.
        """
        start, end = share_bounds(len(part), self.rank, self.world_size)
        share = part[start:end]
        total = units(part)
        fraction = units(share) / total if total else len(share) / len(part)
        return share, weight * fraction

    def reduce_gradients(self, model: torch.nn.Module) -> None:
        """Sum the (already weighted) gradients of the trainable parameters over the group.

        A parameter without a gradient on every worker keeps `grad = None`, as in a single process,
        so AdamW skips it exactly as it would there.
        """
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            return
        has_grad = torch.tensor([float(p.grad is not None) for p in params], device=params[0].device)
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        dist.all_reduce(flat)
        dist.all_reduce(has_grad)
        offset = 0
        for p, present in zip(params, has_grad.tolist()):
            size = p.numel()
            p.grad = flat[offset : offset + size].view_as(p).clone() if present else None
            offset += size

    def reduce_sums(
        self, sums: dict[str, float], tokens: float, ratio_max: float
    ) -> tuple[dict[str, float], float, float]:
        """The minibatch's metric sums, token count and max ratio over the whole group.

        Keys are gathered, not assumed: a worker whose shares were all empty has no sums.
        """
        gathered: list = [None] * self.world_size
        dist.all_gather_object(gathered, (sums, tokens, ratio_max))
        total: dict[str, float] = {}
        for worker_sums, _, _ in gathered:
            for key, value in worker_sums.items():
                total[key] = total.get(key, 0.0) + value
        return total, sum(g[1] for g in gathered), max(g[2] for g in gathered)


def init_group(rank: int, world_size: int, master_addr: str, master_port: int, backend: str = "gloo") -> GradSync:
    """Join the process group at master_addr:master_port and return this worker's GradSync."""
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"torch.distributed backend {backend!r} unknown; use gloo (CPU) or nccl (GPU)")
    if not dist.is_initialized():
        dist.init_process_group(
            backend, init_method=f"tcp://{master_addr}:{master_port}", rank=rank, world_size=world_size
        )
    return GradSync(rank, world_size)


def leave_group() -> None:
    """Destroy this process's group (safe to call when none exists)."""
    if dist.is_initialized():
        dist.destroy_process_group()
