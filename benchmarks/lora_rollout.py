"""Sampling N LoRA roles on one base, side by side: the HF forward per role (the path before LoRA reached the
lean decoder), the lean decoder per role, and the lean decoder with every role's rows in one call.

    python -m benchmarks run lora_rollout --model smollm2-135m-instruct --rounds 3
    python -m benchmarks run lora_rollout --model smollm2-135m-instruct --out benchmarks/results/lora_rollout/unknown-host/lora_rollout.txt

One torch thread, CPU seconds (`time.process_time`: time another process held the core is not counted).
The work is fixed: `--prompts` chat-templated math-team prompts x K `--k` samples x `--tokens` new
tokens, split evenly among N = 1, 2, 4 LoRA adapters (r 16 on q/k/v/o, with random non-zero B so the
deltas are real arithmetic), every row running to the cap (stop tokens off), so every path samples the
same number of tokens. Rounds alternate the paths in order, so all see the same machine load; the
table gives min / median / max CPU seconds per call and the ratios of medians.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from statistics import median

import torch

from teamrl.config import LoraConfig
from teamrl.policies.loading import Policy, load_policy
from teamrl.policies.lora import attach_adapters
from teamrl.rollout import decoding
from teamrl.rollout.builtin_engine import SamplingParams, sample, sample_together
from teamrl.setup.model_sources import resolve_model_source
from benchmarks.harness import add_out_argument, write_result

QUESTIONS = ["What is 12 - 5 + 3?", "What is 7 * 8?", "Compute 45 + 19 - 7.", "What is 9 + 6 * 2?",
             "What is 100 - 37?", "Compute 14 * 3 + 1.", "What is 81 - 29 + 4?", "What is 6 * 7 - 5?"]


def team(model: str, roles: int) -> list[Policy]:
    """`roles` LoRA policies on one freshly loaded base (each adapter's B random, as after training)."""
    base = load_policy("base", resolve_model_source(model))
    names = [f"role{i}" for i in range(roles)]
    network = attach_adapters(base.network, {n: LoraConfig(r=16, alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
                                             for n in names})
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in network.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.01)
    network.eval()
    policies = [Policy(n, network, base.tokenizer, base.use_chat_template, adapter=n) for n in names]
    for policy in policies:
        policy.stop_token_ids = lambda: [-1]  # every row runs to the cap: equal work on every path
    return policies


def prompts_for(policy: Policy, count: int, offset: int) -> list[list[int]]:
    messages = [[{"role": "user", "content": "Solve it and end with 'Answer: <number>'. "
                                             + QUESTIONS[(offset + i) % len(QUESTIONS)]}] for i in range(count)]
    return [policy.encode_prompt(m) for m in messages]


def run_path(path: str, policies: list[Policy], prompts: list[list[list[int]]], k: int, params: SamplingParams) -> float:
    """CPU seconds of one sampling of every role's prompts by `path`."""
    decoding.LEAN_DECODE = path != "hf per role"
    generator = torch.Generator().manual_seed(0)
    start = time.process_time()
    if path == "lean, one call":
        sample_together(policies, prompts, k, params, generator)
    else:
        for policy, group in zip(policies, prompts):
            sample(policy, group, k, params, generator)
    decoding.LEAN_DECODE = True
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=8, help="prompts in all, split among the roles")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--roles", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=3)
    add_out_argument(parser, "lora_rollout")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines: list[str] = []

    def out(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    params = SamplingParams(temperature=0.5, max_new_tokens=args.tokens)
    out(f"# {args.model}: {args.prompts} prompts x K {args.k} x {args.tokens} tokens, split among N LoRA roles; "
        f"1 thread, CPU s; load {os.getloadavg()[0]:.1f} at start; {args.rounds} rounds")
    paths = ("hf per role", "lean per role", "lean, one call")
    medians: dict[tuple[int, str], float] = {}
    for roles in args.roles:
        policies = team(args.model, roles)
        per_role = args.prompts // roles
        prompts = [prompts_for(p, per_role, i * per_role) for i, p in enumerate(policies)]
        run_path("lean, one call", policies, prompts, args.k, params)  # warm-up
        times: dict[str, list[float]] = {p: [] for p in paths}
        for _ in range(args.rounds):
            for path in paths:
                times[path].append(run_path(path, policies, prompts, args.k, params))
        for path in paths:
            medians[roles, path] = median(times[path])
            t = times[path]
            out(f"N={roles} {path:15s} min {min(t):6.2f}  median {median(t):6.2f}  max {max(t):6.2f} s")
        out(f"N={roles} ratios: hf per role / lean one call {medians[roles, paths[0]] / medians[roles, paths[2]]:.2f}x, "
            f"lean per role / lean one call {medians[roles, paths[1]] / medians[roles, paths[2]]:.2f}x")
    first = args.roles[0]
    for roles in args.roles[1:]:
        out(f"cost of N={roles} vs N={first} (same rows in all): "
            + ", ".join(f"{p} {medians[roles, p] / medians[first, p]:.2f}x" for p in paths))
    out(f"load {os.getloadavg()[0]:.1f} at end")
    write_result(args.out, lines)


if __name__ == "__main__":
    sys.exit(main())
