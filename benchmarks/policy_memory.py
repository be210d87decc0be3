"""Peak memory of per-role LoRA adapters on one base vs per-role full copies of that base.

Run: python -m benchmarks run policy_memory [--roles 2 4] [--hidden 768] [--layers 8] [--out FILE]

A Llama-architecture base (~57M parameters at the defaults, character vocabulary) is built offline
and saved once. Each variant then runs in a fresh Python process, which builds the per_role policies
through teamrl's own config path (`build_policies`), makes each policy's optimizer and runs one
update per policy (so AdamW state and gradients exist, as in training). The child reports its peak
resident set size (`resource.getrusage(RUSAGE_SELF).ru_maxrss`) and its resident set size right after
importing torch/transformers/teamrl (VmRSS), so the table can show what the policies themselves cost.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from benchmarks.harness import add_out_argument, child_env, write_result


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def current_rss_mb() -> float:
    """Resident set size now (Linux /proc), the baseline the policies add to."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def child(args: argparse.Namespace) -> None:
    """One variant in this (fresh) process; prints one JSON line."""
    import torch

    from teamrl.config import AlgorithmConfig, load_config
    from teamrl.rollout.builtin_engine import SamplingParams, sample
    from teamrl.rollout.tree import Sample
    from teamrl.setup.team import build_policies
    from teamrl.training.update import make_optimizer, update_policy
    from teamrl.workflows.base import Agent, Outcome

    torch.set_num_threads(1)
    after_import = current_rss_mb()
    roles = args.roles[0]
    agents = [Agent(f"agent_{i}", f"role_{i}") for i in range(roles)]

    class Team:  # build_policies only reads the agents
        def __init__(self) -> None:
            self.agents = agents

    overrides = ["regime=per_role", f"policy.model={args.model}", "policy.lr=1e-4"]
    if args.variant == "lora":
        overrides.append("policy.lora={r: 16, alpha: 32, target_modules: [q_proj, k_proj, v_proj, o_proj]}")
    config = load_config(None, overrides)
    started = time.time()
    policies, mapping = build_policies(config, Team())
    load_s = time.time() - started
    after_load = current_rss_mb()
    optimizers = {n: make_optimizer(p, config.policy_config(n), config.train, False) for n, p in policies.items()}
    algo, rng = AlgorithmConfig(k=2, minibatch_size=8), random.Random(0)
    for agent in agents:
        name = mapping[agent.name]
        policy = policies[name]
        gens = sample(policy, [policy.encode_prompt(f"{agent.name}|plan a path>")], 2,
                      SamplingParams(temperature=1.0, max_new_tokens=16), torch.Generator().manual_seed(0))[0]
        samples = [Sample(g, Outcome(0.0, 0.0), 0.0, 0, 0, 0, agent.name, agent.role, name, advantage=adv)
                   for g, adv in zip(gens, (1.0, -1.0))]
        update_policy(optimizers[name], samples, algo, 1.0, 1.0, rng)
    trainable = sum(p.numel() for g in next(iter(optimizers.values())).optimizer.param_groups for p in g["params"])
    networks = {id(p.network): p.network for p in policies.values()}
    total = sum(q.numel() for net in networks.values() for q in net.parameters())
    print(json.dumps({"variant": args.variant, "roles": roles, "networks": len(networks),
                      "params_in_memory": total, "trainable_per_policy": trainable, "load_s": load_s,
                      "rss_after_import_mb": after_import, "rss_after_load_mb": after_load,
                      "peak_rss_mb": peak_rss_mb()}))


def build_base(folder: Path, hidden: int, layers: int) -> int:
    from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model

    tok = build_char_tokenizer()
    model = build_tiny_model(tok, hidden_size=hidden, num_layers=layers, num_heads=hidden // 64,
                             intermediate_size=hidden * 8 // 3 // 64 * 64)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roles", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--layers", type=int, default=8)
    add_out_argument(parser, "policy_memory")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=["lora", "full"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        params = build_base(base, args.hidden, args.layers)
        rows = []
        for roles in args.roles:
            for variant in ("lora", "full"):
                out = subprocess.run([sys.executable, "-m", "benchmarks.policy_memory", "--child", "--variant", variant,
                                      "--roles", str(roles), "--model", str(base)], capture_output=True, text=True,
                                     env=child_env())
                if out.returncode:
                    sys.exit(f"{variant} x{roles} failed:\n{out.stderr[-3000:]}")
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(rows[-1], flush=True)
    lines = [f"Base: Llama-architecture, hidden {args.hidden}, {args.layers} layers, {params / 1e6:.1f}M parameters, "
             "float32, CPU. One process per row; one update per policy (AdamW state and gradients exist).",
             f"Command: python -m benchmarks run policy_memory --roles {' '.join(map(str, args.roles))} "
             f"--hidden {args.hidden} --layers {args.layers}", "",
             "| roles | variant | models in memory | params in memory | trainable per policy | peak RSS MB "
             "| peak minus RSS after imports MB |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['roles']} | {'LoRA adapters, one base' if r['variant'] == 'lora' else 'full copies'} "
                     f"| {r['networks']} | {r['params_in_memory'] / 1e6:.1f}M | {r['trainable_per_policy'] / 1e6:.2f}M "
                     f"| {r['peak_rss_mb']:.0f} | {r['peak_rss_mb'] - r['rss_after_import_mb']:.0f} |")

    def extra(r: dict) -> float:
        return r["peak_rss_mb"] - r["rss_after_import_mb"]

    for roles in args.roles:
        lora, full = (next(r for r in rows if r["roles"] == roles and r["variant"] == v) for v in ("lora", "full"))
        lines.append(f"\n{roles} roles: LoRA needs {extra(lora):.0f} MB over the imports, full copies "
                     f"{extra(full):.0f} MB ({extra(full) / extra(lora):.1f}x).")
    table = "\n".join(lines)
    print(table)
    write_result(args.out, table.splitlines())


if __name__ == "__main__":
    main()
