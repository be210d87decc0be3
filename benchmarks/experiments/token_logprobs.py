"""The update's log-probs from [N, T, V] logits: log_softmax + gather + entropy vs the chunked function, side by side.

    python -m benchmarks run experiments.token_logprobs --out benchmarks/results/token_logprobs/amd-avx512-full/token_logprobs.txt

One torch thread, CPU seconds of forward + backward (a weighted sum of the log-probs; the entropy computed for
logging, without gradient, as the update does when the entropy is not in the loss), random logits (x 4), the two
alternating in each round; min / median / max over rounds, and the largest differences of values and gradients.
Shapes: SmolLM2's vocabulary (49,152) at 16 x 32 positions, Gemma-3's (262,144) at 8 x 32.
"""

from __future__ import annotations

import argparse
import time
from statistics import median

import torch

from benchmarks.harness import Lines, add_out_argument, spread

from teamrl.policies.token_logprobs import token_logprobs


def plain(logits: torch.Tensor, tokens: torch.Tensor):
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def chunked(logits: torch.Tensor, tokens: torch.Tensor):
    return token_logprobs(logits, tokens, with_entropy=True, entropy_grad=False)


def run(fn, base: torch.Tensor, tokens: torch.Tensor, weights: torch.Tensor):
    x = base.clone().requires_grad_()
    started = time.process_time()
    logp, entropy = fn(x, tokens)
    (logp * weights).sum().backward()
    return time.process_time() - started, logp.detach(), entropy, x.grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    add_out_argument(parser, "token_logprobs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Lines.started()
    out(f"# 1 thread, CPU ms of forward + backward, {args.rounds} rounds alternating plain / chunked")
    for rows, cols, vocab in [(16, 32, 49_152), (8, 32, 262_144)]:
        generator = torch.Generator().manual_seed(0)
        base = torch.randn(rows, cols, vocab, generator=generator) * 4
        tokens = torch.randint(0, vocab, (rows, cols), generator=generator)
        weights = torch.randn(rows, cols, generator=generator)
        times = {"plain": [], "chunked": []}
        for _ in range(args.rounds):
            for name, fn in (("plain", plain), ("chunked", chunked)):
                took, logp, entropy, grad = run(fn, base, tokens, weights)
                times[name].append(took)
                if name == "plain":
                    reference = (logp, entropy, grad)
                else:
                    gaps = [float((a - b).abs().max()) for a, b in zip(reference, (logp, entropy, grad))]
        p, c = times["plain"], times["chunked"]
        out(f"[{rows}, {cols}, {vocab}]: plain {spread(p, '.0f', 1e3)} ms | chunked {spread(c, '.0f', 1e3)} ms | "
            f"plain / chunked {median(p) / median(c):.2f}x; max |difference|: log-probs {gaps[0]:.1e}, "
            f"entropies {gaps[1]:.1e}, gradients {gaps[2]:.1e}")
    out.finish(args.out)


if __name__ == "__main__":
    main()
