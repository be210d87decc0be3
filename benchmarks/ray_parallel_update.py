"""Two per-role policies updated in parallel on Ray vs one after another in one process.

Run: python -m benchmarks run ray_parallel_update [--repeats 4] [--hidden 256] [--layers 4]
Both sides run the same `update_policy` on the same samples (two policies, each its own model and
AdamW) through the two update backends. Local: the updates run in this process one after another,
timed twice, with torch using every core and with one thread (on a machine busy with other work,
multi-threaded kernels can lose more to waiting than they gain). Ray: an actor per policy (one core
and one thread each) updates both at once; its time includes shipping the samples and copying the
trained weights back to the driver. Repeats are interleaved (local every core, local one thread,
ray, ...); the first round is a warm-up and is not counted.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import time

import torch

from benchmarks.harness import Lines, add_out_argument

from teamrl.config import AlgorithmConfig, TrainerConfig
from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.rollout.builtin_engine import Generation
from teamrl.rollout.tree import Sample
from teamrl.training.backends import make_backend
from teamrl.training.backends.base import UpdateSettings, update_seeds
from teamrl.training.update import PolicyOptimizer
from teamrl.workflows.base import Outcome

ROLES = ("tool", "plan")


def make_optimizers(hidden: int, layers: int) -> dict[str, PolicyOptimizer]:
    tok = build_char_tokenizer()
    out = {}
    for i, name in enumerate(ROLES):
        model = build_tiny_model(tok, hidden_size=hidden, num_layers=layers, num_heads=4,
                                 intermediate_size=3 * hidden, seed=i)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        out[name] = PolicyOptimizer(Policy(name, model, tok, False), optimizer, scheduler, None)
    return out


def make_batches(prompts: int, k: int, prompt_len: int, response_len: int) -> dict[str, list[Sample]]:
    """Per role: `prompts` groups of k candidates (AT-GRPO shaped), random tokens, mixed advantages."""
    gen = torch.Generator().manual_seed(0)
    batches = {}
    for name in ROLES:
        samples = []
        for i in range(prompts):
            prompt = torch.randint(4, 90, (prompt_len,), generator=gen).tolist()
            for _ in range(k):
                response = torch.randint(4, 90, (response_len,), generator=gen).tolist()
                logprobs = [-4.5] * response_len
                samples.append(Sample(Generation(prompt, response, logprobs, logprobs, "", True),
                                      Outcome(0.0, 0.0), 0.0, i, i, 0, name, name, name,
                                      advantage=float(torch.randn(1, generator=gen))))
        batches[name] = samples
    return batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--k", type=int, default=8)
    add_out_argument(parser, "ray_parallel_update")
    args = parser.parse_args()
    out = Lines.started()

    import ray

    cores = os.cpu_count() or 1
    ray.init(num_cpus=len(ROLES), include_dashboard=False, log_to_driver=False)
    settings = UpdateSettings(dataclasses.replace(AlgorithmConfig(), minibatch_size=10_000), 1.0, 1.0)
    batches = make_batches(args.prompts, args.k, prompt_len=48, response_len=24)
    local = make_backend(TrainerConfig(), make_optimizers(args.hidden, args.layers), settings)
    remote = make_backend(TrainerConfig(backend="ray", num_cpus_per_policy=1.0),
                          make_optimizers(args.hidden, args.layers), settings)
    params = sum(p.numel() for p in local.optimizers["tool"].policy.model.parameters())
    arms = (("local, every core", local, cores), ("local, one thread", local, 1), ("ray", remote, 1))
    times: dict[str, list[float]] = {label: [] for label, _, _ in arms}
    rng = random.Random(0)
    for repeat in range(args.repeats + 1):
        for label, backend, threads in arms:
            torch.set_num_threads(threads)  # the driver's threads; the actors set their own
            started = time.perf_counter()
            backend.update(batches, update_seeds(list(optimizers), rng))
            if repeat:  # the first pair warms up both (allocations, actor start-up)
                times[label].append(time.perf_counter() - started)
    remote.close()
    ray.shutdown()
    medians = {label: statistics.median(values) for label, values in times.items()}
    out(f"cores: {cores}, load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    out(f"2 policies x {params / 1e6:.2f}M params, {len(batches['tool'])} samples each "
          f"(prompt 48 + response 24 tokens), one minibatch; {args.repeats} repeats after a warm-up")
    for label, values in times.items():
        out(f"{label:<18} median {medians[label]:6.2f} s  ({' '.join(f'{t:.2f}' for t in values)})")
    best_local = min(medians["local, every core"], medians["local, one thread"])
    out(f"speed-up, best local / ray: {best_local / medians['ray']:.2f}x "
          f"(every core / ray: {medians['local, every core'] / medians['ray']:.2f}x)")

    out.finish(args.out, {"median_s": medians, "speedup_best_local_over_ray": best_local / medians["ray"]})

if __name__ == "__main__":
    main()
