"""Sampling with and without the shared-prefix prefill, side by side, on a real model and the real
study's prompts (the scale study's calc_flows chat prompts, whose checking roles see worked examples).

    python benchmarks/shared_prefix.py --model smollm2-135m-instruct --rounds 3
    python benchmarks/shared_prefix.py --output benchmarks/results/shared_prefix.txt

What is sampled: `--instances` held-out instances of each calls of an evaluation (one sample per agent,
as `teamrl.training.evaluate` draws them): voting's three generators (one policy, the same prompt each),
then its aggregator (after three scripted answers), and the evaluator-optimizer's first optimizer turn.
Each call is sampled three ways (`SIDES`): as the engine does now (a prefix of 16 tokens or more that
all prompts share is prefilled once, and a prompt that appears several times is prefilled once); with
the shared prefix only (repeated prompts each prefilled); and every prompt prefilled whole (the path
before both). One torch thread, CPU seconds (`time.process_time`), rounds alternating the sides so all
see the same load; min / median / max and the ratios of medians. The same seed draws the same tokens
on every side unless rounding moves a draw: the script reports the largest difference of the
first-token logits (now vs whole) and how many sampled responses differ.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from statistics import median

import torch

from teamrl.config import load_config
from teamrl.policies.loading import load_policy
from teamrl.rollout import lean_decode
from teamrl.rollout.decoding import open_decoder
from teamrl.rollout.engine import SamplingParams, sample
from teamrl.policies.scoring import left_pad
from teamrl.training.build import build_workflow
from teamrl.training.model_sources import resolve_model_source

CONFIG = "src/teamrl/configs/calc_flows.yaml"
SETTINGS = ("workflow.prompt_style=chat", "rollout.eval_temperature=0.5")
"""The real studies' prompt style and evaluation temperature (teamrl.study.rows.REAL_SETTINGS)."""
WHOLE = 10 ** 9
"""A shared-prefix threshold no prompt reaches: every prompt prefilled whole."""
SIDES = {"now": (16, lean_decode.prefill), "prefix only": (16, lean_decode.prefill_distinct),
         "whole": (WHOLE, lean_decode.prefill_distinct)}
"""side -> (MIN_SHARED_PREFIX, the prefill the decoder calls)."""


def calls(model: str, instances: int) -> dict[str, list]:
    """name -> the chat prompts of one evaluation call (messages, one per sampled row)."""
    voting = build_workflow(load_config(CONFIG, [*SETTINGS, f"policy.model={model}", "workflow.name=voting"]))
    states = [voting.new_state("test", i) for i in range(instances)]
    generators = [voting.render(f"generator_{g}", s) for s in states for g in range(3)]
    for state in states:  # three answers, as the aggregator sees them after the generators' turn
        for g, answer in enumerate(("3+4", "12", "9*2")):
            voting.apply(f"generator_{g}", state, answer)
    aggregator = [voting.render("aggregator", s) for s in states]
    optimizer = build_workflow(load_config(CONFIG, [*SETTINGS, f"policy.model={model}",
                                                    "workflow.name=evaluator_optimizer"]))
    first = [optimizer.render(optimizer.agents[0].name, optimizer.new_state("test", i)) for i in range(instances)]
    return {"voting generators": generators, "voting aggregator": aggregator, "evaluator-optimizer optimizer": first}


def use(side: str) -> None:
    lean_decode.MIN_SHARED_PREFIX, lean_decode.prefill = SIDES[side]


def timed(policy, prompts: list[list[int]], params: SamplingParams, side: str) -> tuple[float, list[str]]:
    use(side)
    generator = torch.Generator().manual_seed(0)
    start = time.process_time()
    out = sample(policy, prompts, 1, params, generator)
    seconds = time.process_time() - start
    use("now")
    return seconds, [g[0].text for g in out]


def first_logit_gap(policy, prompts: list[list[int]]) -> float:
    """Largest |difference| of the prefill's next-token logits, now vs whole prompts."""
    ids, mask = left_pad(prompts, policy.tokenizer.pad_token_id)
    logits = []
    for side in ("now", "whole"):
        use(side)
        with torch.no_grad():
            logits.append(open_decoder(policy.model, ids, mask, 1, 1).prefill_logits)
    use("now")
    return float((logits[0] - logits[1]).abs().max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--instances", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=16, help="max new tokens (the study's answers are short)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines: list[str] = []

    def out(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    policy = load_policy("base", resolve_model_source(args.model))
    params = SamplingParams(temperature=0.5, max_new_tokens=args.tokens)
    out(f"# {args.model}, calc_flows chat prompts, {args.instances} instances per call, T 0.5, up to {args.tokens} "
        f"new tokens; 1 thread, CPU s; load {os.getloadavg()[0]:.1f} at start; {args.rounds} rounds")
    total = dict.fromkeys(SIDES, 0.0)
    for name, messages in calls(args.model, args.instances).items():
        prompts = [policy.encode_prompt(m) for m in messages]
        ids, mask = left_pad(prompts, policy.tokenizer.pad_token_id)
        common = lean_decode.shared_prefix(ids, mask)
        distinct = len({tuple(p) for p in prompts})
        times: dict[str, list[float]] = {side: [] for side in SIDES}
        texts = {}
        for _ in range(args.rounds):
            for side in SIDES:
                seconds, texts[side] = timed(policy, prompts, params, side)
                times[side].append(seconds)
        for side in times:
            total[side] += median(times[side])
        tokens = sum(len(p) for p in prompts)
        differ = sum(a != b for a, b in zip(texts["now"], texts["whole"]))
        out(f"{name}: {len(prompts)} prompts ({distinct} distinct), {tokens} prompt tokens, shared prefix {common} "
            f"tokens ({len(prompts) * common / tokens:.0%} of the prompt tokens)")
        for side, t in times.items():
            out(f"  {side:12s} min {min(t):6.2f}  median {median(t):6.2f}  max {max(t):6.2f} s")
        out(f"  whole / now {median(times['whole']) / median(times['now']):.2f}x, whole / prefix only "
            f"{median(times['whole']) / median(times['prefix only']):.2f}x; first-token logits differ by at most "
            f"{first_logit_gap(policy, prompts):.1e}; {differ} of {len(prompts)} sampled responses differ")
    out(f"all three calls: whole / now {total['whole'] / total['now']:.2f}x, whole / prefix only "
        f"{total['whole'] / total['prefix only']:.2f}x (sums of medians {total['whole']:.1f}, "
        f"{total['prefix only']:.1f}, {total['now']:.1f} s); load {os.getloadavg()[0]:.1f} at end")
    if args.output:
        with open(args.output, "w") as handle:
            handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
