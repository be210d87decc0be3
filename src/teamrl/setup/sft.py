"""Supervised fine-tuning on (prompt, response) pairs, loss on the response tokens only.

Two batch layouts: one demo per row, padded (`pack_tokens=0`, the layout of the first warm-up
recipe), or several demos packed per row with no compute on padding (`teamrl.setup.sft_packing`).
Both minimise the same token-weighted mean response NLL (EOS included).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from teamrl.policies.loading import Policy
from teamrl.policies.scoring import pack_responses, response_logprobs
from teamrl.setup.sft_packing import pack_rows, packed_nll
from teamrl.workflows.base import Prompt

Demo = tuple[Prompt, str]
"""(prompt: text or chat messages, response text); `Policy.encode_prompt` renders either."""


def demo_prompt(prompt: str | list[dict[str, str]]) -> str:
    """A scripted demonstration's prompt as SFT text (a workflow may render chat messages instead)."""
    if not isinstance(prompt, str):
        raise ValueError(
            "supervised warm-ups train on text prompts, and these demonstrations rendered chat messages; "
            "set workflow.prompt_style=compact for the scripted agents"
        )
    return prompt


@dataclass(frozen=True)
class SFTSettings:
    """How `supervised_finetune` trains: optimizer, schedule, batch layout, early stop."""

    steps: int
    """Optimizer steps (the most, when early stopping is on)."""
    lr: float = 1e-3
    """Peak AdamW learning rate."""
    warmup_steps: int = 20
    """Linear learning-rate warm-up, then cosine decay to 0 at `steps`."""
    pack_tokens: int = 0
    """Row width of packed batches; 0 = one demo per row, padded."""
    bf16: bool = False
    """bf16 autocast of the forward (weights and optimizer stay float32)."""
    eval_every: int = 0
    """Score the held-out demos every this many steps (0 = only at the end)."""
    patience: int = 0
    """Stop after this many held-out scores without a new best (0 = never stop early)."""
    seed: int = 0

    def __post_init__(self) -> None:
        problems = [
            f"{name} must be {want}, got {value}"
            for name, value, ok, want in [
                ("steps", self.steps, self.steps >= 1, ">= 1"),
                ("lr", self.lr, self.lr > 0, "> 0"),
                ("warmup_steps", self.warmup_steps, self.warmup_steps >= 0, ">= 0"),
                ("pack_tokens", self.pack_tokens, self.pack_tokens == 0 or self.pack_tokens >= 2, "0 or >= 2"),
                ("eval_every", self.eval_every, self.eval_every >= 0, ">= 0"),
                ("patience", self.patience, self.patience >= 0, ">= 0"),
            ]
            if not ok
        ]
        if self.patience and not self.eval_every:
            problems.append("patience needs eval_every > 0 (early stopping reads the held-out scores)")
        if problems:
            raise ValueError("SFT settings: " + "; ".join(problems))

    def lr_factor(self, step: int) -> float:
        """Multiplier of `lr` at optimizer step `step` (0-based): linear warm-up, cosine decay."""
        warm = min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps else 1.0
        return warm * 0.5 * (1 + math.cos(math.pi * step / self.steps))


@dataclass
class SFTResult:
    """What a fine-tuning run saw."""

    losses: list[float]
    """Training loss of each step taken."""
    heldout: list[tuple[int, float]] = field(default_factory=list)
    """(steps done, held-out demo loss) at each evaluation, the last one after training."""
    stopped_early: bool = False


def encode_demos(policy: Policy, demos: list[Demo]) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, response ids + EOS) of each demo."""
    tok = policy.tokenizer
    return [
        (policy.encode_prompt(p), tok(r, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]) for p, r in demos
    ]


def demo_loss(policy: Policy, encoded: list[tuple[list[int], list[int]]], pack_tokens: int) -> torch.Tensor:
    """Token-weighted mean response NLL of the encoded demos, in the chosen layout (differentiable)."""
    pad = policy.tokenizer.pad_token_id
    if pack_tokens:
        nll, count = packed_nll(policy.model, pack_rows(encoded, pack_tokens, pad))
        return nll / count
    batch = pack_responses([p for p, _ in encoded], [r for _, r in encoded], pad)
    logp, _ = response_logprobs(policy.model, batch)
    return -(logp * batch.response_mask).sum() / batch.response_mask.sum()


@torch.no_grad()
def heldout_loss(policy: Policy, demos: list[Demo], chunk: int = 64) -> float:
    """Token-weighted mean response NLL of `demos` (scored in eval mode, one demo per row)."""
    if not demos:
        raise ValueError("heldout_loss needs at least one demo")
    was_training = policy.model.training
    policy.model.eval()
    total, count = 0.0, 0
    for start in range(0, len(demos), chunk):
        encoded = encode_demos(policy, demos[start : start + chunk])
        tokens = sum(len(r) for _, r in encoded)
        total += demo_loss(policy, encoded, 0).item() * tokens
        count += tokens
    policy.model.train(was_training)
    return total / count


def supervised_finetune(
    policy: Policy,
    batches: Iterator[list[Demo]],
    settings: SFTSettings,
    heldout: list[Demo] | None = None,
    log: Callable[[int, float], None] | None = None,
) -> SFTResult:
    """Minimise the response NLL over `settings.steps` batches with AdamW (weight decay 0.01),
    gradient clipping at 1 and the settings' schedule.

    heldout: demos scored every `settings.eval_every` steps and at the end; with `patience`, the
    run stops once that many scores in a row brought no new best.
    log: called with (step, training loss) after every step (the progress bar).
    """
    torch.manual_seed(settings.seed)
    model = policy.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, settings.lr_factor)
    # bf16 autocast runs the matmuls in bf16 where the CPU has native bf16 dot products.
    autocast = (
        torch.autocast(next(model.parameters()).device.type, dtype=torch.bfloat16) if settings.bf16 else nullcontext()
    )
    result = SFTResult(losses=[])
    best, since_best = math.inf, 0
    model.train()
    for step in range(settings.steps):
        encoded = encode_demos(policy, next(batches))
        with autocast:
            loss = demo_loss(policy, encoded, settings.pack_tokens)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"SFT loss became {loss.item()} at step {step}; lower the lr")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        result.losses.append(loss.item())
        if log is not None:
            log(step, result.losses[-1])
        done = step + 1
        if heldout and settings.eval_every and done % settings.eval_every == 0 and done < settings.steps:
            result.heldout.append((done, heldout_loss(policy, heldout)))
            if result.heldout[-1][1] < best:
                best, since_best = result.heldout[-1][1], 0
            else:
                since_best += 1
            if settings.patience and since_best >= settings.patience:
                result.stopped_early = True
                break
    if heldout:
        result.heldout.append((len(result.losses), heldout_loss(policy, heldout)))
    model.eval()
    return result
