"""oneDNN vs torch's (MKL) linear layers on CPU, side by side: the matmul peak, then sampling and the update at 135M.

    python -m benchmarks run cpu_linear --model smollm2-135m-instruct --rounds 3 --out benchmarks/results/cpu_linear/amd-avx512-full/cpu_linear.txt

One torch thread, CPU seconds (`time.process_time`), one process, the two settings alternating in every round.
1. The fp32 matmul peak: the best of 5 1024-square matmuls (`matmul_peak.py`), `torch.mm` (MKL) and oneDNN's op.
2. The model loaded twice, `policy.cpu_linear: torch` and `onednn` (same weights), then per round and setting:
   - sampling: the built-in engine on `--prompts` chat-templated Plan-Path tool prompts x K `--k`, `--tokens`
     new tokens, every row to the cap (no stop), temperature 1, one seed for both settings;
   - the update: the PPO loss's forward + backward over samples drawn once (autocast_real's chat arithmetic
     rollout), full fine-tuning and a LoRA adapter (r 16 on q/k/v/o).
   Ratios are of medians (torch / onednn seconds).
3. How far the arithmetic moved: the samples' log-probs under both settings (max |difference| per token) and
   the full model's gradient (max |difference| over the largest |gradient|).
"""

from __future__ import annotations

import argparse
import sys
import time
from statistics import median

import torch

from benchmarks.autocast_real import loss_backward, rollout
from benchmarks.matmul_peak import measure_matmul_peak
from benchmarks.harness import Lines, add_out_argument, spread
from benchmarks.rollout_engine import plan_path_prompts

from teamrl.config import AlgorithmConfig, LoraConfig
from teamrl.policies.cpu_linear import OneDnnLinear, onednn_available, resolve_cpu_linear
from teamrl.policies.loading import Policy, load_policy
from teamrl.policies.lora import attach_adapters
from teamrl.policies.scoring import shared_prefix_logprobs
from teamrl.rollout.builtin_engine import SamplingParams, sample
from teamrl.setup.model_sources import resolve_model_source

SETTINGS = ("torch", "onednn")


def time_sampling(policy: Policy, prompts: list[list[int]], k: int, tokens: int) -> float:
    sampler = Policy(policy.name, policy.model, policy.tokenizer, policy.use_chat_template)
    sampler.stop_token_ids = lambda: [-1]  # every row to the cap: the same work on both sides
    started = time.process_time()
    sample(sampler, prompts, k, SamplingParams(temperature=1.0, max_new_tokens=tokens), torch.Generator().manual_seed(0))
    return time.process_time() - started


def with_lora(policy: Policy) -> Policy:
    network = attach_adapters(policy.network, {"role": LoraConfig(r=16, alpha=32,
                                                                  target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])})
    return Policy(policy.name + "-lora", network, policy.tokenizer, policy.use_chat_template, adapter="role")


def logprobs(policy: Policy, samples) -> torch.Tensor:
    prompts, index = [], []
    for s in samples:
        key = list(s.generation.prompt_ids)
        if key not in prompts:
            prompts.append(key)
        index.append(prompts.index(key))
    with torch.no_grad():
        logp, mask, _ = shared_prefix_logprobs(policy.model, prompts, [s.generation.response_ids for s in samples],
                                               index, policy.tokenizer.pad_token_id, 1.0)
    return logp[mask.bool()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    add_out_argument(parser, "cpu_linear")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if not onednn_available():
        sys.exit("this torch has no usable oneDNN linear op (torch.ops.mkldnn._linear_pointwise): nothing to compare")
    out = Lines.started()
    out(f"# 1 thread, CPU s, {args.rounds} rounds alternating torch / onednn")
    out(f"torch's CPU capability: {torch.backends.cpu.get_cpu_capability()}; policy.cpu_linear: auto takes "
        f"{resolve_cpu_linear('auto')} here")
    peaks = {b: measure_matmul_peak(repeats=5, clock=time.process_time, backend=b) for b in SETTINGS}
    out(f"fp32 1024^3 matmul peak: torch.mm (MKL) {peaks['torch']:.1f}, oneDNN {peaks['onednn']:.1f} GFLOP per CPU s "
        f"({peaks['onednn'] / peaks['torch']:.2f}x)")
    source = resolve_model_source(args.model)
    policies = {name: load_policy(name, source, cpu_linear=name) for name in SETTINGS}
    swapped = sum(isinstance(m, OneDnnLinear) for m in policies["onednn"].model.modules())
    out(f"{args.model}: {swapped} linear layers on oneDNN, "
        f"{sum(isinstance(m, OneDnnLinear) for m in policies['torch'].model.modules())} with cpu_linear: torch")
    prompts = plan_path_prompts(policies["torch"], args.prompts)
    samples = rollout(policies["torch"], 4, 4, 48)
    diff = (logprobs(policies["torch"], samples) - logprobs(policies["onednn"], samples)).abs()
    grads = {}
    for name, policy in policies.items():
        loss_backward(policy, samples, AlgorithmConfig())
        grads[name] = torch.cat([p.grad.flatten() for p in policy.model.parameters() if p.grad is not None])
    scale = float(grads["torch"].abs().max())
    out(f"arithmetic: log-probs of {diff.numel()} response tokens differ by max {float(diff.max()):.2e} "
        f"(mean {float(diff.mean()):.2e}); full-model gradients by max {float((grads['torch'] - grads['onednn']).abs().max()) / scale:.2e} "
        f"of the largest")
    del grads
    loras = {name: with_lora(load_policy(name, source, cpu_linear=name)) for name in SETTINGS}
    jobs = {
        f"sampling {args.prompts}x{args.k} rows x {args.tokens} tokens": lambda p, _l: time_sampling(p, prompts, args.k, args.tokens),
        "update full (fwd+bwd)": lambda p, _l: loss_backward(p, samples, AlgorithmConfig()),
        "update lora r16 (fwd+bwd)": lambda _p, lora: loss_backward(lora, samples, AlgorithmConfig()),
    }
    times: dict[str, dict[str, list[float]]] = {job: {name: [] for name in SETTINGS} for job in jobs}
    for name in SETTINGS:  # warm-up, not counted
        jobs["update full (fwd+bwd)"](policies[name], loras[name])
    for r in range(args.rounds):
        for job, run in jobs.items():
            for name in SETTINGS:
                times[job][name].append(run(policies[name], loras[name]))
        out(f"round {r + 1}: " + "; ".join(f"{job}: " + ", ".join(f"{n} {times[job][n][-1]:.2f}" for n in SETTINGS)
                                          for job in jobs))
    for job in jobs:
        t = times[job]
        out(f"{job:34s} torch: {spread(t['torch'])} | onednn: {spread(t['onednn'])} s | "
            f"torch / onednn {median(t['torch']) / median(t['onednn']):.2f}x")
    out.finish(args.out)


if __name__ == "__main__":
    main()
