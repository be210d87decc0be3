"""One GPU, unattended: per-role AT-GRPO updates of a real-size random model, with and without FSDP2 / checkpointing / bf16.

Run (on a machine with one CUDA GPU; under 8 minutes at the defaults on an H100/H200):

    python -m benchmarks run gpu.train_check      # results JSON in benchmarks/results/gpu_train_check/<host>/

Check the command's set-up on a CPU machine (a tiny model, every variant, seconds):

    python -m benchmarks run gpu.train_check --dry-run --out /tmp/train_check.json

The model is a random-weight Qwen2-architecture causal LM of ~1.5B parameters with the real Qwen2
vocabulary size (151,936; the Qwen2.5-1.5B shape), in fp32 master weights with AdamW, as teamrl
trains. The run is per-role: two roles, each its own policy (both held on the GPU, as the per_role
regime does), each updated by teamrl's `update_policy` on AT-GRPO groups: `--prompts` prompts of
`--prompt-len` tokens with `--k` candidates of `--response-len` tokens each, advantages
group-normalised from 0/1 rewards. Rollouts are synthetic (random tokens): this checks the update,
which is what FSDP, checkpointing and mixed precision change; sampling is the rollout engine's check.

Variants (each in a fresh process, so peak memory is its own and an out-of-memory error ends only it):
    plain        fp32, no checkpointing, no sharding
    ckpt         policy.activation_checkpointing (MLPs recomputed in backward)
    fsdp         trainer.shard: fsdp, a group of one GPU (nccl): the sharded code path, nothing to split
    fsdp_ckpt    both
    fsdp_bf16    both, with trainer.shard_param_dtype: bfloat16 (bf16 compute, fp32 weights and AdamW)
Each reports peak GPU memory (torch.cuda.max_memory_allocated), the median step time over the steps
after the first (a step = both roles' updates) and trained tokens per second, into the results JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import child_env, default_out


VARIANTS = {
    "plain": {"fsdp": False, "ckpt": False, "param_dtype": "float32"},
    "ckpt": {"fsdp": False, "ckpt": True, "param_dtype": "float32"},
    "fsdp": {"fsdp": True, "ckpt": False, "param_dtype": "float32"},
    "fsdp_ckpt": {"fsdp": True, "ckpt": True, "param_dtype": "float32"},
    "fsdp_bf16": {"fsdp": True, "ckpt": True, "param_dtype": "bfloat16"},
}
ROLES = ("reasoner", "tool")
# Qwen2.5-1.5B's shape; --dry-run swaps in a tiny one of the same architecture.
REAL_MODEL = {"vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
              "num_attention_heads": 12, "num_key_value_heads": 2}
TINY_MODEL = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(default_out("gpu_train_check")), help="results JSON (default: %(default)s)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--steps", type=int, default=3, help="steps per variant (the first is warm-up)")
    parser.add_argument("--prompts", type=int, default=2, help="AT-GRPO groups per role per step")
    parser.add_argument("--k", type=int, default=4, help="candidates per group")
    parser.add_argument("--prompt-len", type=int, default=1024, help="tokens per prompt")
    parser.add_argument("--response-len", type=int, default=1024, help="tokens per response")
    parser.add_argument("--minibatch", type=int, default=4,
                        help="samples per optimizer step (a group's candidates always share one)")
    parser.add_argument("--variant-timeout", type=float, default=150.0, help="seconds before a variant is stopped")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny model, short sequences, in this process")
    parser.add_argument("--variant", help=argparse.SUPPRESS)  # internal: run one variant, print its JSON
    args = parser.parse_args(argv)
    for name in ("steps", "prompts", "k", "prompt_len", "response_len", "minibatch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.k < 2:
        parser.error("--k must be >= 2 (a group needs two candidates)")
    if args.steps < 2:
        parser.error("--steps must be >= 2: the first step is warm-up and not timed")
    if args.dry_run:
        args.prompt_len, args.response_len = min(args.prompt_len, 16), min(args.response_len, 16)
    return args


def require_cuda() -> None:
    """Stop at once, saying why, where no CUDA GPU is usable."""
    import torch

    if torch.version.cuda is None:
        sys.exit(f"train_check.py needs a CUDA GPU, but this torch ({torch.__version__}) is a CPU-only build; "
                 "run it on a GPU machine, or check the set-up here with --dry-run")
    if not torch.cuda.is_available():
        sys.exit("train_check.py needs a CUDA GPU, but none is visible (nvidia-smi, CUDA_VISIBLE_DEVICES); "
                 "check the set-up on CPU with --dry-run")


def build_states(model_shape: dict, device: str, ckpt: bool) -> dict:
    """One PolicyOptimizer per role: a random Qwen2 model in fp32 with make_optimizer's AdamW and schedule."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from teamrl.config import PolicyConfig, TrainConfig
    from teamrl.policies.loading import Policy, enable_activation_checkpointing
    from teamrl.policies.tiny_model import build_char_tokenizer
    from teamrl.training.update import make_optimizer

    tokenizer = build_char_tokenizer()  # the update reads only its pad id
    states = {}
    for seed, role in enumerate(ROLES):
        torch.manual_seed(seed)
        config = Qwen2Config(**model_shape, tie_word_embeddings=True, max_position_embeddings=8192)
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
        if ckpt:
            enable_activation_checkpointing(model)
        policy = Policy(role, model, tokenizer, False)
        # paper settings: lr 5e-6 with warm-up, weight decay 0.01; no KL, so no reference copy
        states[role] = make_optimizer(policy, PolicyConfig(lr=5e-6), TrainConfig(warmup_steps=10), False)
    return states


def run_variant(name: str, args: argparse.Namespace) -> dict:
    """Run variant `name` here; returns its figures."""
    import torch

    from benchmarks.sharded_memory import synthetic_samples
    from teamrl.config import AlgorithmConfig
    from teamrl.training.update import update_policy

    spec = VARIANTS[name]
    device = "cpu" if args.dry_run else "cuda:0"
    shape = TINY_MODEL if args.dry_run else REAL_MODEL
    if spec["fsdp"]:
        _join_group_of_one(device)
    states = build_states(shape, device, spec["ckpt"])
    if spec["fsdp"]:
        from teamrl.training.backends.fsdp import shard_states

        for role in ROLES:  # each policy its own FSDP module, as each policy group is in the Ray backend
            shard_states({role: states[role]}, 0, 1, device, spec["param_dtype"])
    algo = AlgorithmConfig(minibatch_size=args.minibatch, clip_high=0.28)
    params = sum(p.numel() for p in states[ROLES[0]].policy.network.parameters())
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    tokens = args.prompts * (args.prompt_len + args.k * args.response_len) * len(ROLES)
    for step in range(args.steps):
        started = time.perf_counter()
        for seed, role in enumerate(ROLES):
            samples = synthetic_samples(args.prompts, args.k, args.prompt_len, args.response_len,
                                        shape["vocab_size"], role, role, seed=100 * step + seed)
            stats = update_policy(states[role], samples, algo, 1.0, 1.0, random.Random(step))
            losses.append(stats["loss"])
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    step_s = statistics.median(times[1:])
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
    return {"variant": name, **spec, "params_per_policy": params, "policies": len(ROLES),
            "peak_memory_gib": peak, "step_s": step_s, "first_step_s": times[0],
            "tokens_per_step": tokens, "tokens_per_s": tokens / step_s, "losses": losses}


def _join_group_of_one(device: str) -> None:
    """A torch.distributed group of this process alone (nccl on GPU, gloo on CPU): FSDP needs one."""
    import torch.distributed as dist

    from teamrl.training.data_parallel import init_group

    if dist.is_initialized():
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    init_group(0, 1, "127.0.0.1", port, "nccl" if device.startswith("cuda") else "gloo")


def run_in_child(name: str, args: argparse.Namespace, argv: list[str]) -> dict:
    """Variant `name` in a fresh Python process; an error (e.g. out of memory) becomes its result."""
    command = [sys.executable, "-m", "benchmarks.gpu.train_check", *argv, "--variant", name]
    started = time.time()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.variant_timeout,
                              env=child_env({**os.environ, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}))
    except subprocess.TimeoutExpired:
        return {"variant": name, "error": f"stopped after {args.variant_timeout:.0f} s (--variant-timeout)"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        kind = "out of memory" if "OutOfMemoryError" in (done.stderr or "") else f"exit {done.returncode}"
        return {"variant": name, "error": kind, "stderr_tail": tail, "seconds": time.time() - started}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> list[dict]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.variant:  # the child of run_in_child
        print(json.dumps(run_variant(args.variant, args)))
        return []
    if not args.dry_run:
        require_cuda()
    results = []
    for name in args.variants:
        print(f"train_check: {name} ...", file=sys.stderr, flush=True)
        results.append(run_variant(name, args) if args.dry_run else run_in_child(name, args, argv))
        print(f"train_check: {json.dumps(results[-1])}", file=sys.stderr, flush=True)
    if args.dry_run:
        from teamrl.training.data_parallel import leave_group

        leave_group()
    report = {"device": _device_name(args.dry_run), "dry_run": args.dry_run, "roles": list(ROLES),
              "settings": {k: getattr(args, k) for k in ("steps", "prompts", "k", "prompt_len", "response_len",
                                                          "minibatch")},
              "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"train_check: wrote {args.out}", file=sys.stderr)
    return results


def _device_name(dry_run: bool) -> str:
    import torch

    return "cpu (dry run)" if dry_run else torch.cuda.get_device_name(0)


if __name__ == "__main__":
    main()
