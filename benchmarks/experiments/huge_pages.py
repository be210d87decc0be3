"""Transparent huge pages for torch's CPU allocations, on and off, side by side at 135M.

    python -m benchmarks run experiments.huge_pages --model smollm2-135m-instruct --pairs 3 --out benchmarks/results/huge_pages/amd-avx512-full/huge_pages.txt

Why: on this machine (a VM, transparent huge pages in `madvise` mode) every large tensor torch allocates is
fresh memory from the kernel, and touching it page-faults 4 KiB at a time. A profile of the 135M update showed
the dense gradient of the 49152 x 576 embedding zero-filled at ~0.4 s a call, about 13% of the step. torch's
CPU allocator asks for huge pages when `THP_MEM_ALLOC_ENABLE=1` is set before its first allocation, so the
setting can only be compared across processes: this script starts `--pairs` pairs of worker processes, one
with the variable and one without, alternating, each loading the model, sampling the same chat arithmetic
prompts (`autocast_real.rollout`) and timing, in CPU seconds of one thread (page faults are kernel time and
count):
- `update full`: the PPO loss's forward + backward over every sample, full fine-tuning;
- `update lora`: the same with a LoRA adapter (r 16 on q/k/v/o);
- `sample`: one `rollout` call (the samples themselves).
Each worker repeats the updates `--repeats` times after one uncounted warm-up and reports medians; the table
gives, per measurement, the median over the pairs of each setting and the ratio of those medians. Results are
the same numbers either way (the setting changes where memory comes from, not what is computed); the worker
checks that by printing the loss.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import median
from benchmarks.harness import add_out_argument, child_env

HERE = Path(__file__).resolve().parent


def worker(model: str, repeats: int) -> dict[str, float]:
    """Run in the child process: the timings of one setting."""
    import time

    import torch

    from benchmarks.autocast_real import loss_backward, rollout

    from teamrl.config import AlgorithmConfig, LoraConfig
    from teamrl.policies.loading import Policy, load_policy
    from teamrl.policies.lora import attach_adapters
    from teamrl.setup.model_sources import resolve_model_source

    torch.set_num_threads(1)
    source = resolve_model_source(model)
    full = load_policy("full", source)
    started = time.process_time()
    samples = rollout(full, 4, 4, 48)
    result = {"sample": time.process_time() - started}
    algo = AlgorithmConfig(autocast="off")
    base = load_policy("lora", source)
    network = attach_adapters(base.network, {"role": LoraConfig(r=16, alpha=32,
                                                                target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])})
    lora = Policy("lora", network, base.tokenizer, base.use_chat_template, adapter="role")
    for name, policy in (("update full", full), ("update lora", lora)):
        times = [loss_backward(policy, samples, algo) for _ in range(repeats + 1)][1:]
        result[name] = median(times)
    result["response tokens"] = sum(len(s.generation.response_ids) for s in samples)
    return result


def run_pair_member(model: str, repeats: int, huge: bool) -> dict[str, float]:
    env = child_env(dict(os.environ, OMP_NUM_THREADS="1"))
    env.pop("THP_MEM_ALLOC_ENABLE", None)
    if huge:
        env["THP_MEM_ALLOC_ENABLE"] = "1"
    done = subprocess.run([sys.executable, "-m", "benchmarks.experiments.huge_pages", "--worker", "--model", model, "--repeats", str(repeats)],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    add_out_argument(parser, "huge_pages")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.model, args.repeats)))
        return
    from benchmarks.harness import Lines, spread

    out = Lines.started()
    out(f"# {args.model}; 1 thread, CPU s; {args.pairs} pairs of processes, huge pages off / on alternating; "
        f"{args.repeats} timed repeats a process (median)")
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for pair in range(args.pairs):
        for huge in (False, True):
            result = run_pair_member(args.model, args.repeats, huge)
            runs[huge].append(result)
            out(f"pair {pair + 1} THP_MEM_ALLOC_ENABLE={'1' if huge else 'unset'}: "
                + ", ".join(f"{k} {v:.2f}" for k, v in result.items()))
    for name in ("sample", "update full", "update lora"):
        off = [r[name] for r in runs[False]]
        on = [r[name] for r in runs[True]]
        out(f"{name:12s} off: {spread(off)} s | on: {spread(on)} s | off / on {median(off) / median(on):.2f}x")
    out.finish(args.out)


if __name__ == "__main__":
    main()
