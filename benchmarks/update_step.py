"""The update step's time and share of the matmul peak, each option before/after, side by side in one run.

Run: python -m benchmarks run update_step [--quick] [--out benchmarks/results/update_step/unknown-host/update_step.txt]

One training step's samples come from a real rollout of the default quickstart config
(plan_path_team.yaml, the warmed-up tiny default; it is warmed up first if not cached), with the
loop's advantages and zero-signal filter. On those samples it reports:

1. padding: positions the forward passes compute vs real tokens, before (one forward per part,
   padded to its longest prompt and response) and after (length buckets), one backward and the
   per-role split;
2. timing: `update_policy` (forward, backward, clipping, AdamW step) on the tiny default and on a
   ~25M-parameter Llama (random weights, same tokens; a subset of the prompt groups to keep the
   run short), every variant on the same samples from the same initial weights, variants
   interleaved and rotated within each of `--repeats` rounds, one torch thread. The fp32 and bf16
   matmul peaks are measured between the rounds (best of all rounds); a variant's share of peak
   is its useful FLOPs / its median seconds / the fp32 peak.

FLOPs counted (`update_flops`): real tokens only (padding is waste, not work): every distinct
prompt once and every response; forward = 2 x the decoder's matmul parameters per token + the
output head (2 x hidden x vocab) at each response position and each prompt's last position +
causal attention (QK^T and AV: 4 x hidden x keys per token per layer, keys = the position's real
prefix); backward = 2 x forward. Embedding look-ups, norms, softmax and the optimizer count zero.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import random
import statistics
import time
from pathlib import Path

import torch

from benchmarks.grpo_work import ModelShape
from benchmarks.matmul_peak import matmul_flops, measure_matmul_peak, share_of_peak

from teamrl.config import AlgorithmConfig, load_config
from teamrl.diagnostics.gradients import RoleGradients
from teamrl.policies.loading import Policy
from teamrl.policies.scoring import bf16_body, shared_prefix_logprobs
from teamrl.policies.tiny_model import build_tiny_model
from teamrl.setup.team import build_policies, build_workflow
from teamrl.training.credit import assign_advantages, trainable
from teamrl.training.schedule import rollout_step
from teamrl.training.micro_batches import layout_cells
from teamrl.training.update import PolicyOptimizer, _minibatches, adamw, role_parts, update_policy
from benchmarks.harness import add_out_argument, write_result

CONFIG = Path(__file__).resolve().parents[1] / "src" / "teamrl" / "configs" / "plan_path_team.yaml"
BEFORE = dict(length_buckets=False)
# name -> (algorithm overrides, AdamW implementation, per-role split). "before" is the update as it
# was: one forward per part, padded to its longest sequences, torch's default (for-loop) AdamW on CPU.
VARIANTS = {
    "before, one backward": (BEFORE, "for-loop", False),
    "before, per-role split": (BEFORE, "for-loop", True),
    "buckets": ({}, "for-loop", False),
    "buckets + foreach AdamW": ({}, "foreach", False),
    "buckets + fused AdamW (default)": ({}, "fused", False),
    "default, per-role split": ({}, "fused", True),
    "default + bf16 autocast": (dict(autocast="bf16"), "fused", False),
    "default + micro_batch_tokens 512": (dict(micro_batch_tokens=512), "fused", False),
}


def quickstart_samples(instances: int) -> tuple[list, Policy]:
    """One rollout step of the default quickstart config: its trainable samples and the tiny policy."""
    config = load_config(CONFIG, [f"train.batch_size={instances}"])
    workflow = build_workflow(config)
    policies, mapping = build_policies(config, workflow)
    samples, episodes = rollout_step(config, workflow, policies, mapping, 0, torch.Generator().manual_seed(1000),
                                     random.Random(1000))
    assign_advantages(samples, episodes, config.algorithm)
    return trainable(samples, config.algorithm.drop_zero_signal), next(iter(policies.values()))


def update_flops(model: torch.nn.Module, samples: list, epochs: int = 1) -> float:
    """Useful FLOPs of one update over `samples` (see the module docstring for what is counted)."""
    shape = ModelShape.of(model)
    linear, head, attention = 2 * shape.decoder_weights, 2 * shape.head_weights, 4 * shape.hidden * shape.layers
    forward = 0.0
    for prompt in {tuple(s.generation.prompt_ids) for s in samples}:
        p = len(prompt)
        forward += linear * p + head + attention * p * (p + 1) / 2
    for s in samples:
        p, t = len(s.generation.prompt_ids), len(s.generation.response_ids)
        keys = sum(p + j + 1 for j in range(t))
        forward += linear * t + head * t + attention * keys
    return 3 * forward * epochs


def padding_table(samples: list, minibatch: int) -> list[str]:
    """Computed vs real positions of the step's minibatches, before and after length buckets."""
    lines = ["padding of the quickstart step's minibatches (positions the forwards compute vs real tokens):"]
    algo = AlgorithmConfig()
    for split in (False, True):
        for label, cost in (("before", None), ("after", float(algo.bucket_call_tokens))):
            computed = real = calls = 0
            for chunk in _minibatches(samples, minibatch, random.Random(0)):
                parts = [p for _, agents in role_parts(chunk) for _, p in agents] if split else [chunk]
                for part in parts:
                    c, r, n = layout_cells([tuple(s.generation.prompt_ids) for s in part],
                                           [len(s.generation.response_ids) for s in part], 0, cost)
                    computed, real, calls = computed + c, real + r, calls + n
            lines.append(f"  {'per-role split' if split else 'one backward':<15}{label:<7} computed {computed:>6} "
                         f"real {real:>6}  padding {1 - real / computed:6.1%}  forward calls {calls}")
    return lines


def cpu_matmul_peak(dtype: torch.dtype, size: int = 1024, repeats: int = 5) -> float:
    """Best GFLOP per CPU second of square matmuls: `measure_matmul_peak` on this thread's CPU clock.

    On a shared machine wall time counts the seconds other processes hold the core; this thread's
    CPU time does not, so CPU-time shares hold under load (both sides on the same clock).
    """
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        started = time.thread_time()
        torch.mm(a, b)
        best = min(best, time.thread_time() - started)
    return matmul_flops(size, size, size) / best / 1e9


def bf16_logprob_error(policy: Policy, samples: list) -> tuple[float, float]:
    """Mean and max |log p(bf16 body) - log p(fp32)| over the real response tokens of `samples`."""
    prompts = list(dict.fromkeys(tuple(s.generation.prompt_ids) for s in samples))
    index = [prompts.index(tuple(s.generation.prompt_ids)) for s in samples]
    args = (policy.model, [list(p) for p in prompts], [s.generation.response_ids for s in samples], index,
            policy.tokenizer.pad_token_id)
    with torch.no_grad():
        exact, mask, _ = shared_prefix_logprobs(*args)
        with bf16_body(policy.model):
            fast, _, _ = shared_prefix_logprobs(*args)
    gap = (fast - exact).abs()[mask > 0]
    return float(gap.mean()), float(gap.max())


def time_update(policy: Policy, initial: dict, samples: list, variant: tuple, minibatch: int) -> tuple[float, float]:
    """(wall seconds, this thread's CPU seconds) of one `update_policy` from `initial` with a fresh AdamW."""
    overrides, impl, split = variant
    policy.model.load_state_dict(initial)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = adamw(params, 1e-4, 0.01, impl)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    state = PolicyOptimizer(policy, optimizer, scheduler, None)
    algo = dataclasses.replace(AlgorithmConfig(), minibatch_size=minibatch, **overrides)
    tracker = RoleGradients(params) if split else None
    wall, cpu = time.perf_counter(), time.thread_time()
    update_policy(state, samples, algo, 1.0, 1.0, random.Random(0), tracker)
    return time.perf_counter() - wall, time.thread_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer instances, groups and repeats (~1 minute)")
    parser.add_argument("--instances", type=int, default=0, help="rollout instances (default 16; quick 4)")
    parser.add_argument("--groups-25m", type=int, default=0, help="prompt groups for the 25M model (default 8; quick 2)")
    parser.add_argument("--repeats", type=int, default=0, help="interleaved rounds (default 3; quick 2)")
    add_out_argument(parser, "update_step")
    args = parser.parse_args()
    instances = args.instances or (4 if args.quick else 16)
    groups_25m = args.groups_25m or (2 if args.quick else 8)
    repeats = args.repeats or (2 if args.quick else 3)
    torch.set_num_threads(1)
    samples, tiny = quickstart_samples(instances)
    minibatch = AlgorithmConfig().minibatch_size
    lines = [f"update step, 1 thread; samples: one rollout step of the default quickstart ({instances} instances), "
             f"{len(samples)} trainable samples; minibatch {minibatch}; {repeats} interleaved rounds, median"]
    lines += padding_table(samples, minibatch)
    by_prompt: dict = {}
    for s in samples:
        by_prompt.setdefault(tuple(s.generation.prompt_ids), []).append(s)
    subset = [s for group in list(by_prompt.values())[:groups_25m] for s in group]
    torch.manual_seed(0)
    big = build_tiny_model(tiny.tokenizer, hidden_size=512, num_layers=8, num_heads=8, intermediate_size=1536)
    models = {"tiny default": (tiny, samples),
              "25M": (Policy("25m", big, tiny.tokenizer, False), subset)}
    initial = {name: copy.deepcopy(policy.model.state_dict()) for name, (policy, _) in models.items()}
    wall = {(m, v): [] for m in models for v in VARIANTS}
    cpu = {key: [] for key in wall}
    peaks: dict[str, list[float]] = {"fp32": [], "bf16": [], "cpu fp32": [], "cpu bf16": []}
    order = list(VARIANTS)
    for _ in range(repeats):
        peaks["fp32"].append(measure_matmul_peak())
        peaks["bf16"].append(measure_matmul_peak(dtype=torch.bfloat16))
        peaks["cpu fp32"].append(cpu_matmul_peak(torch.float32))
        peaks["cpu bf16"].append(cpu_matmul_peak(torch.bfloat16))
        for name, (policy, batch) in models.items():
            for variant in order:
                seconds, cpu_seconds = time_update(policy, initial[name], batch, VARIANTS[variant], minibatch)
                wall[(name, variant)].append(seconds)
                cpu[(name, variant)].append(cpu_seconds)
        order = order[1:] + order[:1]
    best = {kind: max(values) for kind, values in peaks.items()}
    lines.append(f"matmul peak (best of {repeats} rounds, 1024^3), GFLOP per wall s: fp32 {best['fp32']:.1f}, bf16 "
                 f"{best['bf16']:.1f}; per CPU s: fp32 {best['cpu fp32']:.1f}, bf16 {best['cpu bf16']:.1f}")
    lines.append("shares: useful FLOPs / median CPU s / the fp32 CPU-time peak (wall: / median wall s / wall peak)")
    for name, (policy, batch) in models.items():
        policy.model.load_state_dict(initial[name])
        decoder = ModelShape.of(policy.model).decoder_weights
        flops = update_flops(policy.model, batch)
        mean_gap, max_gap = bf16_logprob_error(policy, batch)
        lines.append(f"{name}: {decoder / 1e6:.1f}M decoder matmul parameters, {len(batch)} samples, "
                     f"{flops / 1e9:.1f} GFLOP per update; bf16 body vs fp32: |d log p| mean {mean_gap:.4f}, "
                     f"max {max_gap:.4f}")
        lines.append(f"  {'variant':<34}{'CPU s':>8}{'vs before':>10}{'% fp32 peak':>12}{'% bf16 peak':>12}"
                     f"{'wall s':>8}{'% peak (wall)':>14}")
        before = statistics.median(cpu[(name, "before, one backward")])
        for variant in VARIANTS:
            seconds, wall_s = statistics.median(cpu[(name, variant)]), statistics.median(wall[(name, variant)])
            bf16_share = (f"{share_of_peak(flops, seconds, best['cpu bf16']):>12.1%}" if "bf16" in variant
                          else f"{'':>12}")
            lines.append(f"  {variant:<34}{seconds:>8.3f}{before / seconds:>9.2f}x"
                         f"{share_of_peak(flops, seconds, best['cpu fp32']):>12.1%}{bf16_share}"
                         f"{wall_s:>8.3f}{share_of_peak(flops, wall_s, best['fp32']):>14.1%}")
    text = "\n".join(lines)
    print(text)
    write_result(args.out, text.splitlines())


if __name__ == "__main__":
    main()
