"""The arithmetic a GRPO step cannot avoid, and the fastest it could run on this machine.

A side-by-side ratio says how much faster one trainer is than another; it does not say how much
faster either could be. This module counts the matrix-multiply FLOPs of one single-agent GRPO step
(sampling, then one forward and backward over every sample) in two layouts:

- shared prompt (teamrl): each prompt is encoded once for its K samples, in sampling and in the update;
- per row (TRL's GRPOTrainer, `model.generate` on K copies): every sample carries its prompt.

Counted, per token fed: 2 x the decoder's Linear weights and causal attention's 4 x hidden x layers
per (query, key) pair (QK^T and AV); and 2 x the output head's weights per next-token logit needed
(one per response token: at the last prompt position and at every response token but the last,
which is never fed). The update is 3 x its forward (backward 2x: the inputs' and the weights' gradients); with a
frozen base (LoRA) 2 x (backward 1x: the inputs' gradients only, the adapters' own small products not counted).
Not counted: norms, activations, rotary, the embedding lookup, softmax, padding, optimizer, sampling
itself. So the count is a lower bound on the work, and `floor_seconds` (the count at the measured
matmul peak) a lower bound on the time: a step cannot be faster than its floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    """What the FLOP count needs of a Llama-style causal LM."""

    decoder_weights: int  # elements of every Linear weight inside the decoder layers
    head_weights: int  # elements of the output head (hidden x vocabulary)
    hidden: int
    layers: int

    @classmethod
    def of(cls, model) -> ModelShape:
        import torch

        decoder = sum(m.weight.numel() for name, m in model.named_modules()
                      if isinstance(m, torch.nn.Linear) and ".layers." in f".{name}")
        config = model.config
        return cls(decoder, model.get_output_embeddings().weight.numel(), config.hidden_size,
                   config.num_hidden_layers)


def forward_flops(shape: ModelShape, prompt_lengths: Sequence[int], k: int, response_tokens: float,
                  shared_prompt: bool) -> float:
    """Matmul FLOPs of one forward over P prompts x k responses (`response_tokens` in all).

    Responses are taken to be of equal length (the mean); with shared_prompt each prompt is fed once,
    otherwise once per response row.
    """
    if k < 1 or response_tokens < 0 or not prompt_lengths or min(prompt_lengths) < 1:
        raise ValueError(f"need k >= 1, response_tokens >= 0 and prompts of >= 1 token, got k={k}, "
                         f"response_tokens={response_tokens}, prompt_lengths={list(prompt_lengths)[:8]}")
    linear, attention = 2.0 * shape.decoder_weights, 4.0 * shape.hidden * shape.layers
    head = 2.0 * shape.head_weights
    length = response_tokens / (len(prompt_lengths) * k)  # mean response length
    fed = max(length - 1.0, 0.0)  # a response's last token is never an input that a logit is needed from
    copies = 1 if shared_prompt else k
    total = 0.0
    for p in prompt_lengths:
        prompt = linear * p + attention * p * (p + 1) / 2
        # logits at the last prompt position and at every fed response token: one per response token
        response = linear * fed + attention * (p * fed + fed * (fed + 1) / 2) + head * length
        total += copies * prompt + k * response
    return total


def grpo_step_flops(shape: ModelShape, prompt_lengths: Sequence[int], k: int, response_tokens: float,
                    shared_prompt: bool, frozen_base: bool = False) -> float:
    """Sampling (one forward's worth: prefill + decode) plus the update (3 forwards' worth; 2 with a frozen base,
    whose weights need no gradient)."""
    update = 2.0 if frozen_base else 3.0
    return (1.0 + update) * forward_flops(shape, prompt_lengths, k, response_tokens, shared_prompt)


def floor_seconds(flops: float, peak_gflops: float) -> float:
    """The time `flops` take at the measured peak: no step of that work can be faster."""
    if peak_gflops <= 0:
        raise ValueError(f"peak must be positive, got {peak_gflops} GFLOP/s")
    return flops / (peak_gflops * 1e9)
