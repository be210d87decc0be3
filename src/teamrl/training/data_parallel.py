"""Data parallelism within one policy: several workers share each minibatch, gradients all-reduced.

Every worker of a group holds the same weights and the same optimizer state, receives the *same*
samples and the same shuffling seed, so `update_policy` forms the same minibatches everywhere. Each
worker then scores only its contiguous share of a minibatch and the gradients are summed with one
`torch.distributed.all_reduce` (gloo on CPU, nccl on GPUs). Identical gradients on every worker
mean identical clipping and identical optimizer steps, so the replicas never drift apart.

Why the shares are weighted: the loss of a minibatch is an aggregation (a mean over tokens, or over
sequences) of per-token terms. A worker's loss is that aggregation over its share only, so it is
multiplied by the share's weight in the minibatch, tokens_mine / tokens_all for token-mean and
sequences_mine / sequences_all for the sequence means, before the backward pass. The summed
gradients are then exactly the gradient of the whole minibatch's loss, whatever the sizes of the
shares. (Plain DDP averages gradients, which is only right when every share has equal weight.)
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from teamrl.rollout.tree import Sample

# How each metric of `update_policy` combines over the workers of a group; the rest (loss, entropy,
# kl_ref and any metric added later) are aggregations like the loss and use the loss weights.
SUMMED_METRICS = frozenset({"response_tokens"})
MAX_METRICS = frozenset({"ratio_max"})
TOKEN_MEAN_METRICS = frozenset({"clip_frac", "approx_kl_old"})


def share_bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """[start, end) of worker `rank`'s contiguous share of n items (sizes differ by at most one)."""
    return n * rank // world_size, n * (rank + 1) // world_size


class GradSync:
    """One worker's part in a data-parallel group; `update_policy` calls it once per minibatch.

    Needs an initialised torch.distributed process group (see `init_group`).
    """

    def __init__(self, rank: int, world_size: int) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside a group of {world_size} workers")
        self.rank, self.world_size = rank, world_size
        self.weight = 1.0  # weight of this worker's share in the current minibatch's loss
        self.token_weight = 1.0  # its share of the minibatch's response tokens

    def shard(self, chunk: list[Sample], aggregation: str) -> list[Sample]:
        """This worker's share of a minibatch; sets `weight` (and `token_weight`) for it.

        A worker left without samples (a minibatch smaller than the group) still runs one sample
        with weight 0, so that it joins the gradient all-reduce and contributes nothing to it.
        """
        start, end = share_bounds(len(chunk), self.rank, self.world_size)
        mine = chunk[start:end]
        tokens_all = sum(len(s.generation.response_ids) for s in chunk)
        tokens_mine = sum(len(s.generation.response_ids) for s in mine)
        self.token_weight = tokens_mine / tokens_all if tokens_all else len(mine) / len(chunk)
        self.weight = self.token_weight if aggregation == "token-mean" else len(mine) / len(chunk)
        if not mine:
            mine, self.weight, self.token_weight = chunk[:1], 0.0, 0.0
        return mine

    def reduce_gradients(self, model: torch.nn.Module) -> None:
        """Sum the (already weighted) gradients of the trainable parameters over the group.

        A parameter without a gradient on every worker keeps `grad = None`, as in a single process,
        so AdamW skips it exactly as it would there.
        """
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            return
        reference = params[0]
        has_grad = torch.tensor([float(p.grad is not None) for p in params], device=reference.device)
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                          for p in params])
        dist.all_reduce(flat)
        dist.all_reduce(has_grad)
        offset = 0
        for p, present in zip(params, has_grad.tolist()):
            size = p.numel()
            p.grad = flat[offset: offset + size].view_as(p).clone() if present else None
            offset += size

    def reduce_metrics(self, metrics: dict[str, float]) -> dict[str, float]:
        """The minibatch's metrics over the whole group (identical on every worker)."""
        keys = sorted(metrics)
        weighted = torch.tensor([metrics[k] * self._metric_weight(k) for k in keys], dtype=torch.float64)
        dist.all_reduce(weighted)
        maxima = torch.tensor([metrics[k] for k in keys], dtype=torch.float64)
        dist.all_reduce(maxima, op=dist.ReduceOp.MAX)
        return {k: float(maxima[i] if k in MAX_METRICS else weighted[i]) for i, k in enumerate(keys)}

    def _metric_weight(self, key: str) -> float:
        if key in SUMMED_METRICS:
            return 1.0 if self.weight or self.token_weight else 0.0
        if key in TOKEN_MEAN_METRICS:
            return self.token_weight
        return self.weight


def init_group(rank: int, world_size: int, master_addr: str, master_port: int,
               backend: str = "gloo") -> GradSync:
    """Join the process group at master_addr:master_port and return this worker's GradSync."""
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"torch.distributed backend {backend!r} unknown; use gloo (CPU) or nccl (GPU)")
    if not dist.is_initialized():
        dist.init_process_group(backend, init_method=f"tcp://{master_addr}:{master_port}",
                                rank=rank, world_size=world_size)
    return GradSync(rank, world_size)


def leave_group() -> None:
    """Destroy this process's group (safe to call when none exists)."""
    if dist.is_initialized():
        dist.destroy_process_group()
