"""Sampling with and without the shared-prefix prefill, side by side, on a real model and the real
study's prompts (the scale study's calc_flows chat prompts, whose checking roles see worked examples;
or the planning table's Plan-Path prompts with their two worked examples).

    python -m benchmarks run shared_prefix --model smollm2-135m-instruct --rounds 3
    python -m benchmarks run shared_prefix --out benchmarks/results/shared_prefix/unknown-host/shared_prefix.txt
    python -m benchmarks run shared_prefix --model gemma-3-270m --task plan_path --tokens 40

Gemma-3 decodes on the HF forward (its sliding-window layers), which runs the shared prefix once where
the window spans the prompts and the answer (`prompt_prefix.columns_are_positions_free`); there the
"prefix only" side is the "now" side (the HF path has no separate prefill of repeated prompts).

What is sampled: `--instances` held-out instances of each calls of an evaluation (one sample per agent,
as `teamrl.rollout.evaluation` draws them): voting's three generators (one policy, the same prompt each),
then its aggregator (after three scripted answers), and the evaluator-optimizer's first optimizer turn.
Each call is sampled three ways (`SIDES`): as the engine does now (a prefix of 16 tokens or more that
all prompts share is prefilled once, and a prompt that appears several times is prefilled once); with
the shared prefix only (repeated prompts each prefilled); and every prompt prefilled whole (the path
before both). One torch thread, CPU seconds (`time.process_time`), rounds alternating the sides so all
see the same load; min / median / max and the ratios of medians. The same seed draws the same tokens
on every side unless rounding moves a draw: the script reports the largest difference of the
first-token logits (now vs whole) and how many sampled responses differ.

Then the trainer's side (`teamrl.policies.scoring.shared_prefix_logprobs`, the update's forward): each
call's distinct prompts with K 4 responses of 6 tokens each, forward and backward through LoRA r 16
on q/k/v/o (the real studies' adapters), with the shared prefix run once vs every prompt whole; the
largest log-prob difference and the largest LoRA-gradient difference relative to the largest gradient.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from statistics import median

import torch

from teamrl.config import load_config
from teamrl.config import LoraConfig
from teamrl.policies import prompt_prefix
from teamrl.policies.loading import Policy, load_policy
from teamrl.policies.lora import attach_adapters
from teamrl.policies.scoring import shared_prefix_logprobs
from teamrl.rollout import lean_decode
from teamrl.rollout.decoding import open_decoder
from teamrl.rollout.builtin_engine import SamplingParams, sample
from teamrl.policies.scoring import left_pad
from teamrl.setup.team import build_workflow
from teamrl.setup.model_sources import resolve_model_source
from benchmarks.harness import add_out_argument, write_result

CONFIG = "src/teamrl/configs/calc_flows.yaml"
SETTINGS = ("workflow.prompt_style=chat", "rollout.eval_temperature=0.5")
"""The real studies' prompt style and evaluation temperature (teamrl.study.rows.REAL_SETTINGS)."""
DEFAULT = prompt_prefix.MIN_SHARED_PREFIX
WHOLE = 10 ** 9
"""A shared-prefix threshold no prompt reaches: every prompt prefilled whole."""
SIDES = {"now": (DEFAULT, lean_decode.prefill), "prefix only": (DEFAULT, lean_decode.prefill_distinct),
         "whole": (WHOLE, lean_decode.prefill_distinct)}
"""side -> (MIN_SHARED_PREFIX, the prefill the decoder calls)."""


PLAN_CONFIG = "src/teamrl/configs/plan_path_team.yaml"
PLAN_SETTINGS = ("workflow.prompt_style=chat", "task.worked_examples=true", "task.heldout_instances=256")
"""The planning table's prompts (`real_plan_path`: chat style, two worked examples)."""


def plan_calls(model: str, instances: int) -> dict[str, list]:
    """name -> the Plan-Path team's chat prompts: the tool's first turn, then the plan role's after it."""
    team = build_workflow(load_config(PLAN_CONFIG, [*PLAN_SETTINGS, f"policy.model={model}"]))
    states = [team.new_state("heldout", i) for i in range(instances)]
    tool = [team.render("tool", s) for s in states]
    for index, state in enumerate(states):  # a right program on even grids, a wrong one on odd ones
        program = "print(bfs(grid, start, goal))" if index % 2 == 0 else "print('R' * 3)"
        team.apply("tool", state, f"```python\n{program}\n```")
    return {"plan-path tool": tool, "plan-path plan": [team.render("plan", s) for s in states]}


def calls(model: str, instances: int, task: str = "calc_flows") -> dict[str, list]:
    """name -> the chat prompts of one evaluation call (messages, one per sampled row)."""
    if task == "plan_path":
        return plan_calls(model, instances)
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
    prompt_prefix.MIN_SHARED_PREFIX = SIDES[side][0]  # the HF decode path's threshold (Gemma-3)


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


def scored(policy: Policy, prompts: list[list[int]], whole: bool) -> tuple[float, torch.Tensor, list[torch.Tensor]]:
    """CPU seconds of one forward + backward of K 4 six-token responses per prompt; log-probs; LoRA grads."""
    prompt_prefix.MIN_SHARED_PREFIX = WHOLE if whole else DEFAULT
    k = 4
    responses = [[(7 * i + j) % 50 + 100 for j in range(6)] for i in range(len(prompts) * k)]
    model = policy.model
    model.zero_grad()
    start = time.process_time()
    logp, mask, _ = shared_prefix_logprobs(model, prompts, responses, [i // k for i in range(len(responses))],
                                           policy.tokenizer.pad_token_id, temperature=0.5)
    (logp * mask).sum().backward()
    seconds = time.process_time() - start
    prompt_prefix.MIN_SHARED_PREFIX = DEFAULT
    return seconds, logp.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


def sampling_part(policy: Policy, args: argparse.Namespace, out) -> None:
    """The engine's three ways (`SIDES`) on each evaluation call."""
    params = SamplingParams(temperature=0.5, max_new_tokens=args.tokens)
    out(f"# sampling: {args.instances} instances per call, T 0.5, up to {args.tokens} new tokens")
    total = dict.fromkeys(SIDES, 0.0)
    for name, messages in calls(args.model, args.instances, args.task).items():
        prompts = [policy.encode_prompt(m) for m in messages]
        ids, mask = left_pad(prompts, policy.tokenizer.pad_token_id)
        common = lean_decode.shared_prefix(ids, mask)
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
        out(f"{name}: {len(prompts)} prompts ({len({tuple(p) for p in prompts})} distinct), {tokens} prompt tokens, "
            f"shared prefix {common} tokens ({len(prompts) * common / tokens:.0%} of the prompt tokens)")
        for side, t in times.items():
            out(f"  {side:12s} min {min(t):6.2f}  median {median(t):6.2f}  max {max(t):6.2f} s")
        out(f"  whole / now {median(times['whole']) / median(times['now']):.2f}x, whole / prefix only "
            f"{median(times['whole']) / median(times['prefix only']):.2f}x; first-token logits differ by at most "
            f"{first_logit_gap(policy, prompts):.1e}; {differ} of {len(prompts)} sampled responses differ")
    out(f"all calls: whole / now {total['whole'] / total['now']:.2f}x, whole / prefix only "
        f"{total['whole'] / total['prefix only']:.2f}x (sums of medians {total['whole']:.1f}, "
        f"{total['prefix only']:.1f}, {total['now']:.1f} s); load {os.getloadavg()[0]:.1f}")


def scoring_part(policy: Policy, args: argparse.Namespace, out) -> None:
    """The update's forward + backward with the prefix once vs every prompt whole, on each call's prompts."""
    network = attach_adapters(policy.network, {"role": LoraConfig(r=16, alpha=32,
                                                                target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])})
    with torch.no_grad():  # B non-zero, as after training (PEFT starts it at zero)
        generator = torch.Generator().manual_seed(0)
        for name, param in network.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.01)
    lora = Policy("role", network, policy.tokenizer, policy.use_chat_template, adapter="role")
    out(f"# scoring (the update's forward + backward): {args.instances} instances per call, LoRA r 16 on "
        "q/k/v/o, K 4 responses of 6 tokens per distinct prompt")
    totals = {"prefix once": 0.0, "whole": 0.0}
    for name, messages in calls(args.model, args.instances, args.task).items():
        prompts = [list(p) for p in dict.fromkeys(tuple(lora.encode_prompt(m)) for m in messages)]  # distinct
        times: dict[str, list[float]] = {side: [] for side in totals}
        for _ in range(args.rounds):
            seconds, logp, grads = scored(lora, prompts, whole=False)
            times["prefix once"].append(seconds)
            seconds, want_logp, want_grads = scored(lora, prompts, whole=True)
            times["whole"].append(seconds)
        gap = float((logp - want_logp).abs().max())
        grad_gap = (max(float((a - b).abs().max()) for a, b in zip(grads, want_grads))
                    / max(float(g.abs().max()) for g in want_grads))
        for side in totals:
            totals[side] += median(times[side])
        out(f"{name}: {len(prompts)} distinct prompts x K 4")
        for side, t in times.items():
            out(f"  {side:12s} min {min(t):6.2f}  median {median(t):6.2f}  max {max(t):6.2f} s")
        out(f"  whole / prefix once {median(times['whole']) / median(times['prefix once']):.2f}x; log-probs differ by "
            f"at most {gap:.1e}, LoRA gradients by {grad_gap:.1e} of the largest")
    out(f"scoring, all calls: whole / prefix once {totals['whole'] / totals['prefix once']:.2f}x "
        f"(sums of medians {totals['whole']:.1f} vs {totals['prefix once']:.1f} s); load {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--instances", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=16, help="max new tokens (the study's answers are short)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--part", choices=("sampling", "scoring", "both"), default="both")
    parser.add_argument("--task", choices=("calc_flows", "plan_path"), default="calc_flows",
                        help="whose prompts: the scale study's calc_flows or the planning table's Plan-Path")
    add_out_argument(parser, "shared_prefix")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines: list[str] = []

    def out(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    policy = load_policy("base", resolve_model_source(args.model))
    out(f"# {args.model}, {args.task} chat prompts; 1 thread, CPU s; load {os.getloadavg()[0]:.1f} at start; "
        f"{args.rounds} rounds")
    if args.part != "scoring":
        sampling_part(policy, args, out)
    if args.part != "sampling":
        scoring_part(policy, args, out)
    write_result(args.out, lines)


if __name__ == "__main__":
    sys.exit(main())
