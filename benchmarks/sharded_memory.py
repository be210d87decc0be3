"""Peak RSS per policy worker: FSDP2 sharding (trainer.shard) and activation checkpointing, on CPU.

Run: python -m benchmarks run sharded_memory [--layers 12] [--hidden 768] [--vocab 32000] [--out FILE]

One Llama-architecture policy (~110M parameters at the defaults, tied embeddings, vocabulary 32000)
is built once, given its AdamW (make_optimizer) and packed as the Ray backend ships it. Each of the
four variants {shard: none, fsdp} x {activation_checkpointing: off, on} then runs in two fresh
processes, the two ranks of a `data_parallel: 2` group over gloo. Each process is a real
`PolicyWorker` (the class the Ray backend makes an actor of, here without Ray so that its memory is
only the policy's): it unpacks the policy, joins the group (with `shard: fsdp`: shards it), then
runs one `update_policy` on synthetic AT-GRPO samples. A rank reports its peak RSS (VmHWM) of the
update alone (the peak is reset after joining) and over its whole life (which includes unpacking the
full policy, before sharding frees most of it).

The ranks are forked from this process once it holds only the imports (the policy is built, packed
to a file and freed first), so they start in a second instead of importing torch again, and their
RSS starts from the imports alone. glibc is told to serve large blocks by mmap (mallopt), so memory
freed by sharding leaves the resident set instead of hiding the difference.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import math
import random
import socket
import sys
import tempfile
import time
from pathlib import Path
from benchmarks.harness import add_out_argument, write_result

VARIANTS = [("none", False), ("none", True), ("fsdp", False), ("fsdp", True)]


def build_payload(args: argparse.Namespace, path: Path) -> int:
    """Pack one ~100M-parameter policy with its optimizer into `path`; returns its parameter count."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from teamrl.config import PolicyConfig, TrainConfig
    from teamrl.policies.loading import Policy
    from teamrl.policies.tiny_model import build_char_tokenizer
    from teamrl.training.backends.worker import pack
    from teamrl.training.update import make_optimizer

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 8 // 3,
                         num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                         num_key_value_heads=args.hidden // 64, tie_word_embeddings=True,
                         max_position_embeddings=4096)
    model = LlamaForCausalLM(config)
    tokenizer = build_char_tokenizer()  # only its pad id is read by the update
    policy = Policy("policy", model, tokenizer, False)
    state = make_optimizer(policy, PolicyConfig(lr=1e-5), TrainConfig(warmup_steps=0), with_reference=False)
    path.write_bytes(pack({"policy": state}))
    return sum(p.numel() for p in model.parameters())


def synthetic_samples(prompts: int, k: int, prompt_len: int, response_len: int, vocab: int, policy: str = "policy",
                      role: str = "role", seed: int = 1) -> list:
    """`prompts` AT-GRPO groups of `k` candidates each (random tokens), advantages group-normalised from 0/1 rewards."""
    import torch

    from teamrl.algorithms.advantages import group_normalized_advantages
    from teamrl.rollout.builtin_engine import Generation
    from teamrl.rollout.tree import Sample
    from teamrl.workflows.base import Outcome

    gen = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 2, (prompts * k,), generator=gen).float()
    rewards[::k] = 1 - rewards[1::k]  # no group is all equal: every sample carries a gradient
    advantages, _ = group_normalized_advantages(rewards, torch.arange(prompts).repeat_interleave(k))
    samples = []
    for i in range(prompts):
        prompt = torch.randint(4, vocab, (prompt_len,), generator=gen).tolist()
        for j in range(k):
            response = torch.randint(4, vocab, (response_len,), generator=gen).tolist()
            # about a random model's own log-probs (uniform over the vocabulary), so ratios start near 1
            logprobs = (-math.log(vocab) + 0.1 * torch.randn(response_len, generator=gen)).tolist()
            samples.append(Sample(Generation(prompt, response, logprobs, logprobs, "", True),
                                  Outcome(float(rewards[i * k + j]), 0.0), float(rewards[i * k + j]), i, i, 0, role,
                                  role, policy, advantage=float(advantages[i * k + j])))
    return samples


def rank_main(rank: int, world: int, port: int, payload: str, shard: str, recompute: bool,
              args: argparse.Namespace, out: str) -> None:
    """One rank of one variant: a PolicyWorker's life (unpack, join, update); writes its figures to `out`."""
    import json

    import torch

    from teamrl.config import AlgorithmConfig
    from teamrl.policies.loading import enable_activation_checkpointing
    from teamrl.training.backends.base import UpdateSettings
    from teamrl.training.backends.memory import peak_rss_mb
    from teamrl.training.backends.worker import PolicyWorker

    baseline = peak_rss_mb(reset=True)  # torch, transformers and teamrl imported, nothing of the policy yet
    algo = AlgorithmConfig(minibatch_size=args.prompts * args.k)  # one optimizer step over every sample
    worker = PolicyWorker(Path(payload).read_bytes(), "cpu", 1, UpdateSettings(algo, 1.0, 1.0))
    if recompute:
        enable_activation_checkpointing(worker.states["policy"].policy.network)
    worker.join(rank, world, "127.0.0.1", port, shard)
    after_join = peak_rss_mb()
    held = peak_rss_mb(reset=True)  # what the worker holds between updates, and the new peak's start
    before_step: list[float] = []
    optimizer = worker.states["policy"].optimizer  # (FSDP rebuilt it when joining)
    real_step = optimizer.step

    def step_after_noting_peak(*a, **kw):  # forward and backward are done: their peak, apart from AdamW's
        before_step.append(peak_rss_mb())
        return real_step(*a, **kw)

    optimizer.step = step_after_noting_peak
    started = time.time()
    samples = synthetic_samples(args.prompts, args.k, args.prompt_len, args.response_len, args.vocab)
    stats = worker.update({"policy": samples}, {"policy": 5})["policy"][0].stats
    seconds = time.time() - started
    result = {"baseline_mb": baseline, "life_peak_mb": max(after_join, peak_rss_mb()), "held_mb": held,
              "update_peak_mb": peak_rss_mb(), "backward_peak_mb": max(before_step), "update_s": seconds, "loss": stats["loss"],
              "grad_norm": stats["grad_norm"]}
    Path(f"{out}.rank{rank}").write_text(json.dumps(result))
    torch.distributed.barrier()  # leave together (gloo can abort a rank whose peer is still talking)
    torch.distributed.destroy_process_group()


def mmap_large_blocks(threshold: int = 1 << 17) -> None:
    """glibc: allocate blocks >= `threshold` bytes with mmap, so freeing them returns them to the system.

    (glibc otherwise raises the threshold after each large free and keeps later blocks on its heap.)
    """
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    m_mmap_threshold = -3  # from malloc.h
    if not libc.mallopt(m_mmap_threshold, threshold):
        raise OSError("mallopt(M_MMAP_THRESHOLD) failed: is this glibc?")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_variant(shard: str, recompute: bool, payload: Path, args: argparse.Namespace, folder: Path) -> list[dict]:
    import json

    import torch.multiprocessing as mp

    out = folder / f"{shard}-{int(recompute)}"
    mp.start_processes(rank_main, args=(2, free_port(), str(payload), shard, recompute, args, str(out)), nprocs=2,
                       join=True, start_method="fork")
    return [json.loads(Path(f"{out}.rank{r}").read_text()) for r in range(2)]


def format_table(params: int, rows: list[tuple[str, bool, list[dict]]], args: argparse.Namespace) -> str:
    """The results as a text table: per variant, the larger of the two ranks' figures."""
    tokens = args.prompts * (args.prompt_len + args.k * args.response_len)
    lines = [f"Peak RSS per policy worker, data_parallel: 2 over gloo on CPU; policy of {params / 1e6:.1f}M "
             f"parameters (fp32, AdamW), {args.layers} layers, hidden {args.hidden}, vocabulary {args.vocab}; one "
             f"update of {args.prompts} x {args.k} samples (prompt {args.prompt_len}, responses "
             f"{args.response_len} tokens; {tokens} distinct tokens). MiB, max over the 2 ranks.",
             f"Weights + gradients + AdamW moments, all fp32: {params * 16 / 2**20:.0f} MiB unsharded, "
             f"{params * 8 / 2**20:.0f} MiB per rank if split in two.", "",
             f"{'shard':<6} {'act.ckpt':<9} {'update peak':>12} {'fwd+bwd peak':>13} {'held between':>13} "
             f"{'life peak':>10} {'imports':>8} {'loss':>10} {'update s':>9}"]
    for shard, recompute, ranks in rows:
        top = {key: max(r[key] for r in ranks) for key in ("update_peak_mb", "backward_peak_mb", "held_mb",
                                                           "life_peak_mb", "baseline_mb", "update_s")}
        lines.append(f"{shard:<6} {('on' if recompute else 'off'):<9} {top['update_peak_mb']:>12.0f} "
                     f"{top['backward_peak_mb']:>13.0f} "
                     f"{top['held_mb']:>13.0f} {top['life_peak_mb']:>10.0f} {top['baseline_mb']:>8.0f} "
                     f"{ranks[0]['loss']:>10.5f} {top['update_s']:>9.1f}")
    lines += ["", "update peak: VmHWM during the update (reset after joining the group); fwd+bwd peak: the same "
              "peak read when AdamW's step is called, i.e. of the forward and backward passes (and, without "
              "sharding, the gradient all-reduce); held between: RSS after "
              "joining, i.e. what a worker keeps between updates (before the first step's AdamW moments exist); "
              "life peak: over the worker's life, including unpacking the full policy before sharding; imports: "
              "RSS of torch + transformers + teamrl alone. Seconds come from a shared 2-core machine: compare "
              "them only with each other."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--prompts", type=int, default=2, help="AT-GRPO groups (distinct prompts)")
    parser.add_argument("--k", type=int, default=4, help="candidates per prompt")
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--response-len", type=int, default=64)
    add_out_argument(parser, "sharded_memory")
    args = parser.parse_args(argv)
    if not Path("/proc/self/status").exists():
        sys.exit("sharded_memory.py reads peak RSS from /proc (Linux only)")
    mmap_large_blocks()
    import torch

    torch.set_num_threads(1)  # no intra-op thread pool in the parent: the forked ranks start their own
    random.seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        payload = folder / "policy.pt"
        params = build_payload(args, payload)
        rows = []
        for shard, recompute in VARIANTS:
            print(f"shard={shard} activation_checkpointing={recompute} ...", flush=True)
            rows.append((shard, recompute, run_variant(shard, recompute, payload, args, folder)))
    table = format_table(params, rows, args)
    print(table)
    write_result(args.out, table.splitlines())


if __name__ == "__main__":
    main()
