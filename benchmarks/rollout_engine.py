"""Rollout engine vs `model.generate`: tokens/s on the same model, prompts and batch, side by side.

Run: python benchmarks/rollout_engine.py [--model PATH] [--prompts 32] [--k 8] [--tokens 32]
Two settings, each timed side by side (interleaved repeats, the first repeat is a warm-up and is
not counted):
- fixed length: no stop before the length cap on either side (same number of tokens);
- natural stop: EOS ends a response; tokens counted up to and including each row's EOS. Here the
  engine's dropping of finished rows counts, as it does in training.
Both include computing the sampled tokens' log-probs (the trainer needs them).
"""

from __future__ import annotations

import argparse
import time

import torch

from teamrl.policies.loading import Policy, load_policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.rollout.engine import SamplingParams, sample
from teamrl.tasks.plan_path import PlanPathConfig
from teamrl.workflows.plan_path_team import PlanPathWorkflow


def plan_path_prompts(policy: Policy, n: int) -> list[list[int]]:
    workflow = PlanPathWorkflow(PlanPathConfig(size=6), runner=None)
    return [policy.encode_prompt(workflow.render("tool", workflow.new_state("heldout", i))) for i in range(n)]


def time_engine(policy, prompts, k, tokens, seed, natural):
    sampler = Policy(policy.name, policy.model, policy.tokenizer, policy.use_chat_template)
    if not natural:
        sampler.stop_token_ids = lambda: [-1]  # run to the cap, as generate does with min_new_tokens
    started = time.perf_counter()
    out = sample(sampler, prompts, k, SamplingParams(temperature=1.0, max_new_tokens=tokens),
                 torch.Generator().manual_seed(seed))
    elapsed = time.perf_counter() - started
    return sum(len(g.response_ids) for group in out for g in group) / elapsed, elapsed


def time_generate(policy, prompts, k, tokens, seed, natural):
    tok = policy.tokenizer
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts])
    mask = (torch.arange(width)[None, :] >= torch.tensor([width - len(p) for p in prompts])[:, None]).long()
    torch.manual_seed(seed)
    started = time.perf_counter()
    with torch.no_grad():
        out = policy.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0,
                                    top_k=0, top_p=1.0, num_return_sequences=k, max_new_tokens=tokens,
                                    min_new_tokens=0 if natural else tokens,
                                    eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                    output_scores=True, return_dict_in_generate=True)
        # generate returns scores, not sampled-token log-probs: computing them is part of the job
        logp = torch.stack(out.scores, 1).log_softmax(-1)
        logp.gather(-1, out.sequences[:, width:, None])
    elapsed = time.perf_counter() - started
    new = out.sequences[:, width:]
    if natural:  # count each row up to and including its first EOS
        is_eos = new == tok.eos_token_id
        first = torch.where(is_eos.any(1), is_eos.float().argmax(1) + 1, torch.full_like(is_eos[:, 0], new.shape[1], dtype=torch.long))
        return int(first.sum()) / elapsed, elapsed
    return new.numel() / elapsed, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="", help="model folder (default: a fresh tiny default)")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.model:
        policy = load_policy("bench", args.model)
    else:
        tok = build_char_tokenizer()
        policy = Policy("bench", build_tiny_model(tok).eval(), tok, False)
    prompts = plan_path_prompts(policy, args.prompts)
    print(f"{args.prompts} prompts x {args.k} samples x {args.tokens} new tokens, "
          f"{torch.get_num_threads()} threads")
    for natural in (False, True):
        label = "natural stop (EOS)" if natural else "fixed length"
        ratios = []
        for r in range(args.repeats + 1):  # interleaved, so both see the same machine load
            engine, te = time_engine(policy, prompts, args.k, args.tokens, r, natural)
            hf, th = time_generate(policy, prompts, args.k, args.tokens, r, natural)
            tag = "warm-up" if r == 0 else f"repeat {r}"
            if r:
                ratios.append(engine / hf)
            print(f"{label:18s} {tag:8s}: engine {engine:7.0f} tok/s ({te:.2f}s)  model.generate "
                  f"{hf:7.0f} tok/s ({th:.2f}s)  ratio {engine / hf:.2f}x")
        ratios.sort()
        print(f"{label}: median ratio engine / generate over {args.repeats} repeats: "
              f"{ratios[len(ratios) // 2]:.2f}x")


if __name__ == "__main__":
    main()
