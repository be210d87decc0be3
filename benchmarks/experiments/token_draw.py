"""The engine's token draw (inverse CDF, one uniform per row) vs `torch.multinomial(probs, 1)`, side by side.

    python -m benchmarks run experiments.token_draw --out benchmarks/results/token_draw/unknown-host/token_draw.txt

One torch thread, CPU seconds per draw over [rows, vocabulary] probabilities at T 0.5 of random logits;
the two alternate within each round (same load), min / median / max over rounds. The vocabulary sizes
are SmolLM2's (49,152) and Gemma-3's (262,144).
"""

from __future__ import annotations

import argparse
import os
import time
from statistics import median

import torch

from teamrl.rollout.token_draw import draw_tokens
from benchmarks.harness import add_out_argument, write_result


def timed(fn, repeats: int) -> float:
    start = time.process_time()
    for _ in range(repeats):
        fn()
    return (time.process_time() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--vocab", type=int, nargs="+", default=[49152, 262144])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    add_out_argument(parser, "token_draw")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines = [f"# token draw, 1 thread, ms of CPU per draw (min / median / max of {args.rounds} rounds x "
             f"{args.repeats}); load {os.getloadavg()[0]:.1f} at start"]
    generator = torch.Generator().manual_seed(0)
    for vocab in args.vocab:
        for rows in args.rows:
            probs = torch.softmax(torch.randn(rows, vocab, generator=generator) * 3 / 0.5, -1)
            sides = {"multinomial": lambda: torch.multinomial(probs, 1, generator=generator),
                     "inverse cdf": lambda: draw_tokens(probs, generator)}
            times: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(args.rounds):
                for name, fn in sides.items():
                    times[name].append(1000 * timed(fn, args.repeats))
            cells = "; ".join(f"{name} {min(t):.2f} / {median(t):.2f} / {max(t):.2f}" for name, t in times.items())
            ratio = median(times["multinomial"]) / median(times["inverse cdf"])
            lines.append(f"V={vocab} rows={rows}: {cells} ms; multinomial / inverse cdf {ratio:.1f}x")
            print(lines[-1], flush=True)
    lines.append(f"load {os.getloadavg()[0]:.1f} at end")
    write_result(args.out, lines)


if __name__ == "__main__":
    main()
