"""`rollout.sampler_dtype: bfloat16` against float32 on a real 135M model: sampling throughput side by side, and
how far the bf16 sampler's log-probs (mu) sit from the trainer's fp32 ones (pi_prox).

    OMP_NUM_THREADS=1 python -m benchmarks run sampler_dtype --model smollm2-135m-instruct

One torch thread, CPU seconds (the process's own: a loaded machine slows the wall clock, less so these). Each
round samples the same chat-templated arithmetic prompts (`--prompts` x K `--k`, `--tokens` new tokens at T 0.5)
once in float32 and once in bfloat16, alternating, from one generator seed; the table gives min / median / max
response tokens per CPU second and the ratio of medians. The model loads as training loads it
(`policy.cpu_linear: auto`: oneDNN where torch's kernels are AVX-512 ones), so the float32 side is the sampler
a run would use. The gap: each bf16-sampled response token's log-prob as the sampler reported it against the
trainer's fp32 log-prob of that token (`shared_prefix_logprobs`, the trainer's scoring), max and mean absolute
difference: what `algorithm.rollout_correction` weighs. The probe's figures (`policies/arithmetic_probe.py`,
measured afresh, not read from the cache) come first.
"""

from __future__ import annotations

import argparse
import time
from statistics import median

import torch

from benchmarks.autocast_real import QUESTIONS
from benchmarks.harness import Lines, add_out_argument, spread
from teamrl.policies.arithmetic_probe import measure
from teamrl.policies.loading import Policy, load_policy
from teamrl.policies.scoring import shared_prefix_logprobs
from teamrl.rollout.builtin_engine import Generation, SamplingParams, sample
from teamrl.setup.model_sources import resolve_model_source

TEMPERATURE = 0.5


def draw(policy: Policy, prompts: list[list[int]], k: int, tokens: int, dtype: str) -> tuple[list[Generation], float]:
    """The generations of one sampling call and its CPU seconds."""
    params = SamplingParams(temperature=TEMPERATURE, max_new_tokens=tokens, dtype=dtype)
    start = time.process_time()
    groups = sample(policy, prompts, k, params, torch.Generator().manual_seed(0))
    return [g for group in groups for g in group], time.process_time() - start


def logprob_gap(policy: Policy, generations: list[Generation]) -> tuple[float, float]:
    """(max, mean) |sampler's log-prob - trainer's fp32 log-prob| over the response tokens."""
    prompts, index = [], []
    for g in generations:
        if g.prompt_ids not in prompts:
            prompts.append(g.prompt_ids)
        index.append(prompts.index(g.prompt_ids))
    responses = [g.response_ids for g in generations]
    with torch.no_grad():
        trainer, mask, _ = shared_prefix_logprobs(policy.model, prompts, responses, index,
                                                  policy.tokenizer.pad_token_id, TEMPERATURE)
    sampler = torch.zeros_like(trainer)
    for row, g in enumerate(generations):
        sampler[row, :len(g.logprobs)] = torch.tensor(g.logprobs)
    diff = (sampler - trainer).abs()[mask.bool()]
    return float(diff.max()), float(diff.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    add_out_argument(parser, "sampler_dtype")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Lines.started()
    probe = measure()
    out(probe.summary())
    policy = load_policy("policy", resolve_model_source(args.model))
    prompts = [policy.encode_prompt([{"role": "user", "content": f"{q} End with 'Answer: <number>'."}])
               for q in QUESTIONS[:args.prompts]]
    out(f"# {args.model}: {args.prompts} prompts x {args.k} samples, up to {args.tokens} new tokens, T {TEMPERATURE}; "
        f"1 thread, CPU s; {args.rounds} rounds")
    rates: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    seconds: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    last: dict[str, list[Generation]] = {}
    for dtype in rates:  # untimed: first-touch allocations, bf16 weight copies made
        draw(policy, prompts, args.k, args.tokens, dtype)
    for _ in range(args.rounds):
        for dtype in rates:
            generations, spent = draw(policy, prompts, args.k, args.tokens, dtype)
            rates[dtype].append(sum(len(g.response_ids) for g in generations) / spent)
            seconds[dtype].append(spent)
            last[dtype] = generations
    for dtype, r in rates.items():
        out(f"{dtype:8s}: tokens per CPU s {spread(r, '7.1f')} (median {median(seconds[dtype]):.2f} CPU s a call)")
    ratio = median(rates["bfloat16"]) / median(rates["float32"])
    out(f"bf16 / fp32 tokens per CPU s: {ratio:.2f}x")
    gaps = {dtype: logprob_gap(policy, last[dtype]) for dtype in rates}
    for dtype, (high, mean) in gaps.items():
        out(f"{dtype:8s} sampler vs fp32 trainer log-prob: max {high:.4f}, mean {mean:.5f} per response token")
    out.finish(args.out, {
        "tokens_per_cpu_s": {dtype: median(r) for dtype, r in rates.items()}, "bf16_over_fp32": ratio,
        "logprob_gap": {dtype: {"max": high, "mean": mean} for dtype, (high, mean) in gaps.items()},
        "probe": {"gflops": probe.gflops, "cpu_linear": probe.cpu_linear, "sampler_dtype": probe.sampler_dtype}})


if __name__ == "__main__":
    main()
