"""Rollout engine vs `model.generate`, side by side, and the engine's decode as a share of the matmul peak.

    python -m benchmarks run rollout_engine --quick          # about a minute on an idle 2-core machine
    python -m benchmarks run rollout_engine --models tiny    # one model of the full table
    python -m benchmarks run rollout_engine --out benchmarks/results/rollout_engine/unknown-host/rollout_engine.txt
    python -m benchmarks run rollout_engine --models 135M    # SmolLM2-135M-Instruct, chat prompts

One torch thread. For each model (the tiny default, a 25M and a 150M-parameter Llama of the same
shape family, random weights, the character vocabulary; on request SmolLM2-135M-Instruct, its own
tokenizer and chat template) and each setting, the engine and
`model.generate` run on the same prompts (Plan-Path tool prompts) and batch, interleaved: warm-up,
then repeats alternating engine / generate, so both see the same machine load. Settings:
- fixed length: no stop before the cap on either side (every row makes the same number of tokens);
- natural stop: EOS ends a response, tokens counted up to and including each row's EOS; here the
  engine's dropping of finished rows counts, as it does in training.
Both sides include the sampled tokens' log-probs (the trainer needs them). Ratios are medians over
the repeats, on wall time and on CPU time (`time.process_time`: on a shared machine, time another
process held the core is not counted; wall time is).

Share of the peak: `measure_matmul_peak` (the best of seven 1024^3 fp32 matmuls, same thread, on
the wall clock and on the CPU clock; the faster of torch.mm and oneDNN, which the 135M model's layers use) measured in this run before each model. Decode alone: per
repeat, a fixed-length call of T tokens minus a call of 1 token (prefill, first draw, collecting),
so T - 1 decode steps over all rows with their sampling and bookkeeping; the median over repeats.
FLOPs counted: 2 x (parameters in matrix multiplies: every Linear weight of the layers plus the
LM head; not the embedding lookup, norms or activations) per token fed, over the prefill's padded
[B, P] tokens and every decode row, plus attention's 4 x heads x head_dim x context per token per
layer (QK^T and AV at the step's context width).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from statistics import median

import torch

from benchmarks.matmul_peak import measure_matmul_peak, share_of_peak

from teamrl.policies.cpu_linear import onednn_available
from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.rollout.builtin_engine import SamplingParams, sample
from teamrl.rollout.lean_decode import lean_unsupported
from teamrl.tasks.plan_path import PlanPathConfig
from teamrl.workflows.plan_path_team import PlanPathWorkflow
from benchmarks.harness import add_out_argument, write_result

SHAPES = {  # name -> build_tiny_model keyword arguments
    "tiny": {},
    "25M": {"hidden_size": 512, "num_layers": 8, "num_heads": 8, "intermediate_size": 1408},
    "150M": {"hidden_size": 1024, "num_layers": 12, "num_heads": 16, "intermediate_size": 2816},
}
# name -> a real pretrained model (`teamrl models install` name), sampled on chat-templated prompts
REAL = {"135M": "smollm2-135m-instruct"}


@dataclass(frozen=True)
class Plan:
    """What to run on one model."""

    shape: str
    prompts: int
    k: int
    tokens: int
    repeats: int
    versus_generate: bool  # False: the engine alone, for the share-of-peak row
    warm_up: bool = True  # one uncounted round first (not worth its time where one call takes seconds)


FULL = [Plan("tiny", 32, 8, 64, 3, True), Plan("25M", 32, 8, 32, 1, True, warm_up=False),
        Plan("150M", 8, 32, 4, 1, False, warm_up=False), Plan("135M", 8, 4, 64, 2, True)]
QUICK = [Plan("tiny", 32, 8, 32, 2, True), Plan("25M", 8, 8, 16, 1, True), Plan("150M", 8, 8, 4, 1, False),
         Plan("135M", 4, 4, 16, 1, True, warm_up=False)]


def plan_path_prompts(policy: Policy, n: int) -> list[list[int]]:
    workflow = PlanPathWorkflow(PlanPathConfig(size=6), runner=None)
    return [policy.encode_prompt(workflow.render("tool", workflow.new_state("heldout", i))) for i in range(n)]


def _timed(run) -> tuple[int, float, float]:
    """(tokens, wall s, CPU s) of run() -> tokens."""
    wall, cpu = time.perf_counter(), time.process_time()
    tokens = run()
    return tokens, time.perf_counter() - wall, time.process_time() - cpu


def time_engine(policy, prompts, k, tokens, seed, natural) -> tuple[int, float, float]:
    sampler = Policy(policy.name, policy.model, policy.tokenizer, policy.use_chat_template)
    if not natural:
        sampler.stop_token_ids = lambda: [-1]  # run to the cap, as generate does with min_new_tokens
    params = SamplingParams(temperature=1.0, max_new_tokens=tokens)

    def run() -> int:
        out = sample(sampler, prompts, k, params, torch.Generator().manual_seed(seed))
        return sum(len(g.response_ids) for group in out for g in group)
    return _timed(run)


def time_generate(policy, prompts, k, tokens, seed, natural) -> tuple[int, float, float]:
    tok = policy.tokenizer
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts])
    mask = (torch.arange(width)[None, :] >= torch.tensor([width - len(p) for p in prompts])[:, None]).long()

    def run() -> int:
        torch.manual_seed(seed)
        with torch.no_grad():
            out = policy.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0,
                                        top_k=0, top_p=1.0, num_return_sequences=k, max_new_tokens=tokens,
                                        min_new_tokens=0 if natural else tokens,
                                        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                        output_scores=True, return_dict_in_generate=True)
            # generate returns scores, not sampled-token log-probs: computing them is part of the job
            torch.stack(out.scores, 1).log_softmax(-1).gather(-1, out.sequences[:, width:, None])
        new = out.sequences[:, width:]
        if not natural:
            return new.numel()
        is_eos = new == tok.eos_token_id  # count each row up to and including its first EOS
        first = torch.where(is_eos.any(1), is_eos.float().argmax(1) + 1, torch.full_like(new[:, 0], new.shape[1]))
        return int(first.sum())
    return _timed(run)


def matmul_parameters(model) -> int:
    """Weights that take part in a matrix multiply per token: the layers' Linear weights and the LM head."""
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


def sample_flops(model, prompt_width: int, prompts: int, k: int, tokens: int) -> float:
    """FLOPs of one fixed-length `sample` call (see the module doc for what is counted)."""
    config = model.config
    linear, attn = 2.0 * matmul_parameters(model), 4.0 * config.hidden_size * config.num_hidden_layers
    prefill = prompts * prompt_width * linear + prompts * attn * prompt_width * (prompt_width + 1) / 2
    # decode step s (1 .. tokens-1) feeds one token per row at context prompt_width + s
    decode = sum(prompts * k * (linear + attn * (prompt_width + s)) for s in range(1, tokens))
    return prefill + decode


def bench_policy(shape: str) -> Policy:
    """The tiny-family model of `shape` (random weights, character vocabulary) or the real model it names."""
    if shape in REAL:
        from teamrl.policies.loading import load_policy
        from teamrl.setup.model_sources import resolve_model_source
        policy = load_policy("bench", resolve_model_source(REAL[shape]))
        policy.model.eval()
        return policy
    tok = build_char_tokenizer()
    return Policy("bench", build_tiny_model(tok, **SHAPES[shape]).eval(), tok, False)


def bench_model(plan: Plan, out) -> None:
    policy = bench_policy(plan.shape)
    model = policy.model
    prompts = plan_path_prompts(policy, plan.prompts)
    width = max(len(p) for p in prompts)
    params = sum(p.numel() for p in model.parameters())
    decoder = "lean" if lean_unsupported(model, width + plan.tokens) is None else "HF forward"
    # the yardstick is the faster of torch.mm (MKL) and oneDNN, whichever the host runs faster
    # (`policy.cpu_linear: auto` picks by the same property), so neither one's lower rate overstates the share
    backends = ("torch", "onednn") if onednn_available() else ("torch",)
    peaks = {"wall": max(measure_matmul_peak(backend=b) for b in backends),
             "CPU": max(measure_matmul_peak(clock=time.process_time, backend=b) for b in backends)}
    out(f"\n== {plan.shape}: {params / 1e6:.2f}M parameters ({matmul_parameters(model) / 1e6:.2f}M in matmuls), "
        f"{plan.prompts} prompts x {plan.k} samples = {plan.prompts * plan.k} rows x {plan.tokens} tokens, "
        f"prompt width {width}, decoder: {decoder}; fp32 matmul peak (the faster of {' and '.join(backends)}) "
        f"{peaks['wall']:.1f} GFLOP/s (wall), {peaks['CPU']:.1f} (CPU time)")
    if plan.versus_generate:
        for natural in (False, True):
            _side_by_side(plan, policy, prompts, natural, out)
    _decode_share(plan, policy, prompts, peaks, out)


def _side_by_side(plan: Plan, policy: Policy, prompts, natural: bool, out) -> None:
    label = "natural stop" if natural else "fixed length"
    sides = [("engine", time_engine), ("generate", time_generate)]
    runs: dict[str, list[tuple[int, float, float]]] = {name: [] for name, _ in sides}
    first = 0 if plan.warm_up else 1
    for r in range(first, plan.repeats + 1):  # interleaved, so both see the same machine load
        for name, timer in sides:
            runs[name].append(timer(policy, prompts, plan.k, plan.tokens, r, natural))
        cells = "  ".join(f"{name} {n / wall:7.0f} tok/s ({wall:5.2f}s wall, {cpu:5.2f}s CPU)"
                          for name, (n, wall, cpu) in ((s, runs[s][-1]) for s, _ in sides))
        out(f"{label:13s} {'warm-up' if r == 0 else f'repeat {r}':8s}: {cells}")
    for clock, i in (("wall", 1), ("CPU", 2)):
        ratios = [(e[0] / e[i]) / (g[0] / g[i])
                  for e, g in zip(runs["engine"][1 - first:], runs["generate"][1 - first:])]
        out(f"{plan.shape} {label}: engine / generate tokens/s, median over {plan.repeats} repeats "
            f"({clock} time): {median(ratios):.2f}x")


def _decode_share(plan: Plan, policy: Policy, prompts, peaks: dict[str, float], out) -> None:
    """Decode alone: a fixed-length call of `tokens` minus one of 1 token (prefill, first draw, collect)."""
    width = max(len(p) for p in prompts)
    flops = (sample_flops(policy.model, width, plan.prompts, plan.k, plan.tokens)
             - sample_flops(policy.model, width, plan.prompts, plan.k, 1))
    if plan.warm_up:
        time_engine(policy, prompts, plan.k, 1, 0, False)
    spans = {"wall": [], "CPU": []}
    for r in range(plan.repeats):
        _, wall_1, cpu_1 = time_engine(policy, prompts, plan.k, 1, r, False)
        _, wall_n, cpu_n = time_engine(policy, prompts, plan.k, plan.tokens, r, False)
        spans["wall"].append(wall_n - wall_1)
        spans["CPU"].append(cpu_n - cpu_1)
    for clock, seconds in spans.items():
        took = median(seconds)
        share = share_of_peak(flops, took, peaks[clock])
        # above 100%: the peak's short matmuls were slowed by other processes more than the decode was
        caveat = " (over 100%: the peak was measured under load; read the CPU-time line)" if share > 1 else ""
        out(f"{plan.shape} decode ({plan.prompts * plan.k} rows, {plan.tokens - 1} steps) as a share of the "
            f"matmul peak ({clock} time): {flops / 1e9:.1f} GFLOP in {took:.2f}s = {flops / took / 1e9:.1f} "
            f"GFLOP/s = {100 * share:.0f}% of {peaks[clock]:.1f}{caveat}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small batches, one repeat: about a minute")
    parser.add_argument("--models", nargs="+", choices=[*SHAPES, *REAL], default=list(SHAPES),
                        help="135M: SmolLM2-135M-Instruct (`teamrl models install smollm2-135m-instruct`), "
                             "chat-templated prompts; not in the default set")
    add_out_argument(parser, "rollout_engine")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines: list[str] = []

    def out(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    out(f"torch {torch.__version__}, {torch.get_num_threads()} thread, "
        f"{'--quick' if args.quick else 'full'} run; load average at start: "
        f"{' '.join(f'{x:.1f}' for x in _load())}")
    for plan in QUICK if args.quick else FULL:
        if plan.shape in args.models:
            bench_model(plan, out)
    out(f"load average at end: {' '.join(f'{x:.1f}' for x in _load())}")
    write_result(args.out, lines)


def _load() -> tuple[float, float, float]:
    try:
        import os
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


if __name__ == "__main__":
    main()
