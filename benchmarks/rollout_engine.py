"""Rollout engine vs `model.generate`: tokens/s on the same model, prompts and batch, side by side.

Run: python benchmarks/rollout_engine.py [--model PATH] [--prompts 32] [--k 8] [--tokens 32]
Both sample at temperature 1 with no stop before the length cap (EOS is suppressed on both sides
by sampling a fixed number of tokens), so they produce the same number of tokens.
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


def time_engine(policy, prompts, k, tokens, seed):
    no_eos = Policy(policy.name, policy.model, policy.tokenizer, policy.use_chat_template)
    no_eos.stop_token_ids = lambda: [-1]  # run to the cap, as generate below does
    started = time.perf_counter()
    out = sample(no_eos, prompts, k, SamplingParams(temperature=1.0, max_new_tokens=tokens),
                 torch.Generator().manual_seed(seed))
    elapsed = time.perf_counter() - started
    return sum(len(g.response_ids) for group in out for g in group) / elapsed, elapsed


def time_generate(policy, prompts, k, tokens, seed):
    tok = policy.tokenizer
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts])
    mask = (torch.arange(width)[None, :] >= torch.tensor([width - len(p) for p in prompts])[:, None]).long()
    torch.manual_seed(seed)
    started = time.perf_counter()
    with torch.no_grad():
        out = policy.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0,
                                    top_k=0, top_p=1.0, num_return_sequences=k, max_new_tokens=tokens,
                                    min_new_tokens=tokens, pad_token_id=tok.pad_token_id,
                                    output_scores=True, return_dict_in_generate=True)
        # generate returns scores, not sampled-token log-probs: computing them is part of the job
        logp = torch.stack(out.scores, 1).log_softmax(-1)
        logp.gather(-1, out.sequences[:, width:, None])
    elapsed = time.perf_counter() - started
    return out.sequences[:, width:].numel() / elapsed, elapsed


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
    ratios = []
    for r in range(args.repeats):  # interleaved, so both see the same machine load
        engine, te = time_engine(policy, prompts, args.k, args.tokens, r)
        hf, th = time_generate(policy, prompts, args.k, args.tokens, r)
        ratios.append(engine / hf)
        print(f"repeat {r}: teamrl engine {engine:8.0f} tok/s ({te:.2f}s)   model.generate {hf:8.0f} tok/s "
              f"({th:.2f}s)   ratio {engine / hf:.2f}x")
    ratios.sort()
    print(f"median ratio engine / generate: {ratios[len(ratios) // 2]:.2f}x")


if __name__ == "__main__":
    main()
