"""The built-in engine's decode at 135M with and without each of two decode changes (packed weights, the fused draw), side by side.

    python -m benchmarks run experiments.decode_parts --out benchmarks/results/decode_parts/amd-avx512-full/decode_parts_135m.txt

One torch thread, CPU seconds (`time.process_time`), one process, the settings alternating in every round on the same
SmolLM2-135M-Instruct (fp32, linear layers on oneDNN), `--prompts` chat-templated Plan-Path tool prompts x K `--k`,
`--tokens` new tokens, every row to the cap (no stop), temperature 1, the same seed for every setting:
- before: the decode's projections through the plain oneDNN op (`layer_linear`: oneDNN re-blocks the weight on every
  call), the token draw as it was (full log-softmax, exp, then `draw_tokens` on the normalised probabilities);
- packed: projections on oneDNN's packed weights (`packed_linear`, packed once per weight version), the old draw;
- after: packed, and the draw from the logits in one fused softmax (`draw_from_logits`), as the engine runs now.
With `--repack` every timed call first changes every weight's version (an in-place no-op, outside the timing), so each
call packs the whole model again, as the first rollout call after each optimizer step does in training; without it the
packs are reused from the second call on (the later calls of a step's rollout, an evaluation). The cost of packing the
whole model once is printed on its own.
"""

from __future__ import annotations

import argparse
import time
from statistics import median

import torch

from benchmarks.matmul_peak import measure_matmul_peak
from benchmarks.harness import Lines, add_out_argument, spread
from benchmarks.rollout_engine import plan_path_prompts

import teamrl.rollout.builtin_engine as engine
import teamrl.rollout.lora_rows as lora_rows
from teamrl.policies.cpu_linear import OneDnnLinear, _packs, layer_linear, packed_linear, packed_weight
from teamrl.policies.loading import Policy, load_policy
from teamrl.rollout.builtin_engine import SamplingParams, sample
from teamrl.rollout.token_draw import draw_tokens
from teamrl.setup.model_sources import resolve_model_source

SETTINGS = ("before", "packed", "after")
NEW_CHOOSE = engine._choose


def old_choose(scaled: torch.Tensor, params: SamplingParams, truncated: bool, generator: torch.Generator):
    """The draw before this change: log-softmax over [R, V], its exp, `draw_tokens` on the probabilities."""
    if params.temperature == 0 or truncated:
        return NEW_CHOOSE(scaled, params, truncated, generator)
    logp = torch.log_softmax(scaled, dim=-1)
    chosen = draw_tokens(logp.exp(), generator)
    picked = logp.gather(-1, chosen[:, None]).squeeze(-1)
    return chosen, picked, picked


def configure(setting: str) -> None:
    lora_rows.packed_linear = layer_linear if setting == "before" else packed_linear
    engine._choose = NEW_CHOOSE if setting == "after" else old_choose


def time_sampling(policy: Policy, prompts: list[list[int]], k: int, tokens: int, repack: bool) -> float:
    if repack:  # as an optimizer step would: every weight's version moves, its pack is stale
        with torch.no_grad():
            for parameter in policy.model.parameters():
                parameter.add_(0.0)
    started = time.process_time()
    sample(policy, prompts, k, SamplingParams(temperature=1.0, max_new_tokens=tokens), torch.Generator().manual_seed(0))
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repack", action="store_true", help="every call packs the model again (a training step)")
    add_out_argument(parser, "decode_parts")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Lines.started()
    out(f"# 1 thread, CPU s, {args.rounds} rounds alternating {' / '.join(SETTINGS)}")
    loaded = load_policy("bench", resolve_model_source(args.model), cpu_linear="onednn")  # what it compares is on oneDNN
    policy = Policy(loaded.name, loaded.model, loaded.tokenizer, loaded.use_chat_template)
    policy.stop_token_ids = lambda: [-1]  # every row to the cap: the same work in every setting
    prompts = plan_path_prompts(policy, args.prompts)
    rows = args.prompts * args.k
    layers = [m for m in policy.model.modules() if isinstance(m, OneDnnLinear)]
    _packs.clear()
    started = time.process_time()
    for layer in layers:
        packed_weight(layer.weight)
    out(f"{args.model}: packing its {len(layers)} oneDNN layers once: {time.process_time() - started:.2f} CPU s")
    peak = measure_matmul_peak(repeats=5, clock=time.process_time, backend="onednn")
    for setting in SETTINGS:  # warm-up, not counted
        configure(setting)
        time_sampling(policy, prompts, args.k, 4, args.repack)
    times: dict[str, list[float]] = {s: [] for s in SETTINGS}
    for r in range(args.rounds):
        for setting in SETTINGS:
            configure(setting)
            times[setting].append(time_sampling(policy, prompts, args.k, args.tokens, args.repack))
        out(f"round {r + 1}: " + ", ".join(f"{s} {times[s][-1]:.2f}" for s in SETTINGS))
    configure("after")
    out(f"sampling {args.prompts} prompts x K {args.k} = {rows} rows x {args.tokens} tokens, "
        f"{'packing again in every call' if args.repack else 'packs reused across calls'} (fp32 oneDNN peak "
        f"{peak:.1f} GFLOP per CPU s):")
    base = median(times["before"])
    for setting in SETTINGS:
        t = times[setting]
        out(f"  {setting:7s} {spread(t)} s, "
            f"{rows * args.tokens / median(t):5.0f} tokens per CPU s, before / this {base / median(t):.2f}x")
    out.finish(args.out)


if __name__ == "__main__":
    main()
