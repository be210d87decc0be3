"""Update steps at 135M with glibc's default malloc vs `train.keep_freed_memory` (freed memory kept for reuse).

    python -m benchmarks run freed_memory --rounds 2 --out benchmarks/results/freed_memory/amd-avx512-full/freed_memory_135m.txt

The setting is process-wide, so each (round, setting) is its own child process, the two settings alternating
round by round. A child: 1 torch thread, SmolLM2-135M-Instruct (fp32, oneDNN linears), one rollout of
`--prompts` chat-templated arithmetic prompts x K `--k` x `--tokens` new tokens (autocast_real's, drawn once with
seed 0: the same samples in every child), then `--steps` update steps on them (the PPO loss's forward and backward,
fused AdamW, gradients set to None), each timed in CPU seconds with its minor page faults (`getrusage`). The
first two steps allocate the optimizer state and grow the heap; the steady state is the median of the later ones.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from statistics import median
from benchmarks.harness import add_out_argument, child_env

SETTINGS = ("default", "keep")


def child(setting: str, args: argparse.Namespace) -> None:
    import torch

    from benchmarks.autocast_real import loss_backward, rollout

    from teamrl.config import AlgorithmConfig
    from teamrl.policies.loading import load_policy
    from teamrl.training.freed_memory import keep_freed_memory
    from teamrl.setup.model_sources import resolve_model_source

    applied = keep_freed_memory() if setting == "keep" else False
    torch.set_num_threads(1)
    policy = load_policy("bench", resolve_model_source(args.model))
    samples = rollout(policy, args.prompts, args.k, args.tokens)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-6, fused=True)
    steps = []
    for _ in range(args.steps):
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        started = time.process_time()
        loss_backward(policy, samples, AlgorithmConfig())
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        steps.append((time.process_time() - started, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"setting": setting, "applied": applied, "steps": steps, "peak_rss_mb": peak_mb,
                      "tokens": sum(len(s.generation.response_ids) for s in samples)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    add_out_argument(parser, "freed_memory")
    parser.add_argument("--child", choices=SETTINGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return
    from benchmarks.harness import Lines, spread

    out = Lines.started()
    out(f"# 1 thread, CPU s per update step (forward + backward + fused AdamW), {args.prompts} prompts x K {args.k} x "
        f"{args.tokens} tokens, {args.steps} steps per child process, settings alternating over {args.rounds} rounds")
    steady: dict[str, list[float]] = {s: [] for s in SETTINGS}
    faults: dict[str, list[int]] = {s: [] for s in SETTINGS}
    env = child_env({**os.environ, "OMP_NUM_THREADS": "1"})
    for r in range(args.rounds):
        for setting in SETTINGS:
            command = [sys.executable, "-m", "benchmarks.freed_memory", "--child", setting, "--model", args.model, "--prompts", str(args.prompts),
                       "--k", str(args.k), "--tokens", str(args.tokens), "--steps", str(args.steps)]
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            later = result["steps"][2:]
            steady[setting].append(median(t for t, _ in later))
            faults[setting].append(int(median(f for _, f in later)))
            out(f"round {r + 1} {setting:7s} (mallopt applied: {result['applied']}): steps "
                + ", ".join(f"{t:.2f}s/{f // 1000}k faults" for t, f in result["steps"])
                + f"; steady median {steady[setting][-1]:.2f} s; peak RSS {result['peak_rss_mb']:.0f} MB; "
                  f"{result['tokens']} response tokens")
    base = median(steady["default"])
    for setting in SETTINGS:
        t = steady[setting]
        out(f"{setting:7s}: steady-state step {spread(t, '.2f')} CPU s, "
            f"median {median(faults[setting]) // 1000}k page faults per step; default / this {base / median(t):.2f}x")
    out.finish(args.out)


if __name__ == "__main__":
    main()
