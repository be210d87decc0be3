"""Built-in engine vs vLLM vs `model.generate`: rollout tokens per CPU-second, side by side, one run.

Run (in the vLLM venv, .ci/vllm makes one):
    OMP_NUM_THREADS=1 python -m benchmarks run vllm_engine [--models tiny,90m] [--repeats 3]
Writes benchmarks/results/vllm_engine/unknown-host/vllm_engine.txt (with --out, elsewhere).

Models: the tiny default (~0.8M parameters, teamrl's char vocabulary), a ~90M-parameter Llama (hidden
768, 12 layers, head size 64), random weights, float32 (`--dtype bfloat16` too); and on request (`--models
135m`) SmolLM2-135M-Instruct (`teamrl models install smollm2-135m-instruct`), its own tokenizer and chat
template, 8 prompts x K 4 x 64 new tokens. Prompts are Plan-Path tool prompts; every engine samples K responses per prompt at temperature 1
with EOS stops and returns the sampled tokens' log-probs (what the trainer needs). Timing is
CPU-seconds of this process (`time.process_time`), so the figures hold on a loaded machine;
engines run interleaved, the first repeat is a warm-up and not counted, and the ratios are medians.
vLLM runs in-process (colocated), as `rollout.engine: vllm` runs it; its start-up is timed apart.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from benchmarks.harness import add_out_argument, provenance, write_result
from benchmarks.rollout_engine import plan_path_prompts, time_generate

from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.rollout import builtin_engine as builtin
from teamrl.rollout.builtin_engine import SamplingParams

# name -> (tiny-model builder arguments, prompts, K, new tokens): the tiny default at the paper's
# batch shape; the 90M model at a smaller batch that one CPU thread samples in seconds.
MODELS = {
    "tiny": ({}, 32, 8, 32),
    "90m": ({"hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 2048}, 8, 4, 32),
    "135m": ("smollm2-135m-instruct", 8, 4, 64),  # a real model: an installable name, not a builder's arguments
}


def build_policy(size: dict | str, dtype: torch.dtype) -> Policy:
    if isinstance(size, str):
        from teamrl.policies.loading import load_policy
        from teamrl.setup.model_sources import resolve_model_source
        policy = load_policy("bench", resolve_model_source(size), dtype=str(dtype).removeprefix("torch."))
        policy.model.eval()
        return policy
    tok = build_char_tokenizer()
    model = build_tiny_model(tok, **size).to(dtype).eval()
    return Policy("bench", model, tok, False)


def cpu_rate(run) -> tuple[float, float]:
    """(tokens per CPU-second, CPU-seconds) of `run()`, which returns the number of tokens it sampled."""
    started = time.process_time()
    tokens = run()
    spent = time.process_time() - started
    return tokens / max(spent, 1e-9), spent


def count(groups) -> int:
    return sum(len(g.response_ids) for group in groups for g in group)


def bench_model(name: str, dtype: torch.dtype, repeats: int, lines: list[str]) -> None:
    from teamrl.rollout.vllm_engine import VllmEngine

    size, n_prompts, k, tokens = MODELS[name]
    policy = build_policy(size, dtype)
    params_m = sum(p.numel() for p in policy.model.parameters()) / 1e6
    prompts = plan_path_prompts(policy, n_prompts)
    params = SamplingParams(temperature=1.0, max_new_tokens=tokens)
    started = time.perf_counter()
    engine = VllmEngine([policy], kv_cache_gb=0.5)
    startup = time.perf_counter() - started
    header = (f"{name} ({params_m:.1f}M params, {str(dtype).removeprefix('torch.')}): {n_prompts} prompts x K={k} x "
              f"{tokens} new tokens; vLLM start-up {startup:.1f} s wall")
    lines.append(header)
    print(header, flush=True)
    rates: dict[str, list[float]] = {"builtin": [], "vllm": [], "generate": []}
    try:
        for r in range(repeats + 1):
            gen = torch.Generator().manual_seed(r)
            runs = {
                "builtin": lambda: count(builtin.sample(policy, prompts, k, params, gen)),
                "vllm": lambda: count(engine.sample(policy, prompts, k, params, gen)),
                "generate": lambda: _generate_tokens(policy, prompts, k, tokens, r),
            }
            row = {key: cpu_rate(run) for key, run in runs.items()}
            tag = "warm-up " if r == 0 else f"repeat {r}"
            line = f"  {tag}: " + "  ".join(f"{key} {rate:7.0f} tok/cpu-s ({spent:.2f}s)"
                                            for key, (rate, spent) in row.items())
            lines.append(line)
            print(line, flush=True)
            if r:
                for key, (rate, _) in row.items():
                    rates[key].append(rate)
    finally:
        engine.close()
    med = {key: sorted(v)[len(v) // 2] for key, v in rates.items()}
    summary = (f"  median over {repeats}: builtin {med['builtin']:.0f}, vllm {med['vllm']:.0f}, generate "
               f"{med['generate']:.0f} tok/cpu-s; vllm / builtin {med['vllm'] / med['builtin']:.2f}x, "
               f"vllm / generate {med['vllm'] / med['generate']:.2f}x, builtin / generate "
               f"{med['builtin'] / med['generate']:.2f}x")
    lines.append(summary)
    print(summary, flush=True)


def _generate_tokens(policy: Policy, prompts, k: int, tokens: int, seed: int) -> int:
    """Tokens `model.generate` sampled (each row up to its EOS), with their log-probs computed."""
    sampled, _, _ = time_generate(policy, prompts, k, tokens, seed, natural=True)
    return sampled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="tiny,90m", help=f"comma-separated, from {', '.join(MODELS)}")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=3)
    add_out_argument(parser, "vllm_engine")
    args = parser.parse_args()
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    torch.set_num_threads(1)
    meta = provenance()
    lines = [f"# {meta['command']} at {meta['commit']}, {meta['date']}, load average {meta['load_average']}",
             f"# OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, torch threads "
             f"{torch.get_num_threads()}; tokens per CPU-second of this process (robust to machine load)"]
    for name in args.models.split(","):
        bench_model(name, getattr(torch, args.dtype), args.repeats, lines)
    print(f"wrote {write_result(args.out, lines, meta=meta)}")


if __name__ == "__main__":
    main()
