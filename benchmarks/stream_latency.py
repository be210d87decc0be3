"""Gateway token streaming on a real model: time to the first streamed text against time to the whole answer,
through the `openai` client, with a request streamed alone and in a batch of several.

    OMP_NUM_THREADS=1 python -m benchmarks run stream_latency --model smollm2-135m-instruct

One torch thread. Each round sends `--batch` concurrent requests (one batched decode: the sampler waits
for all of them) with `stream: true` and, alternating, the same requests without it, each round from one generator
seed (a batch's rows may draw in another order, so the two answers' lengths can differ). Per streamed request: seconds from sending to the first non-empty
text delta, and to the end of the stream; per plain request: seconds to the answer. The table gives
min / median / max over rounds and requests, and the response lengths in tokens.
"""

from __future__ import annotations

import argparse
import threading
import time

import torch

from benchmarks.harness import Lines, add_out_argument, spread
from teamrl.gateway import AgentRoute, Gateway, SamplingWorker
from teamrl.policies.loading import load_policy
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.setup.model_sources import resolve_model_source

PROMPTS = [
    "Tell me a story about a lighthouse keeper and a storm.",
    "Explain how a bicycle stays upright, step by step.",
    "Describe a day in the life of a honeybee.",
    "Write a letter from a sailor to his family.",
    "Explain why the sky is blue to a ten-year-old.",
    "Describe how bread is made, from wheat to loaf.",
    "Tell me about the history of the printing press.",
    "Write a short travel guide to an imaginary island.",
]


def one_request(client, prompt: str, stream: bool, tokens: int) -> dict[str, float]:
    """{first, whole}: seconds to the first text delta (streamed only) and to the whole answer."""
    messages = [{"role": "user", "content": prompt}]
    start = time.perf_counter()
    if not stream:
        reply = client.chat.completions.create(model="agent", messages=messages, max_tokens=tokens)
        return {"whole": time.perf_counter() - start, "tokens": reply.usage.completion_tokens}
    first = None
    usage = None
    chunks = client.chat.completions.create(model="agent", messages=messages, max_tokens=tokens, stream=True,
                                            stream_options={"include_usage": True})
    for chunk in chunks:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - start
        if chunk.usage is not None:
            usage = chunk.usage
    whole = time.perf_counter() - start
    return {"first": whole if first is None else first, "whole": whole,
            "tokens": usage.completion_tokens if usage else 0}


def one_round(gateway: Gateway, batch: int, stream: bool, tokens: int, seed: int) -> list[dict[str, float]]:
    """`batch` concurrent requests sampled in one engine call (the worker waits for all of them)."""
    import openai

    assert gateway.worker is not None
    gateway.worker.generator.manual_seed(seed)
    gateway.worker.flush_at = batch
    client = openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0, timeout=600)
    results: list[dict[str, float]] = [{} for _ in range(batch)]

    def run(i: int) -> None:
        results[i] = one_request(client, PROMPTS[i % len(PROMPTS)], stream, tokens)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(batch)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--tokens", type=int, default=128, help="max_tokens of each request")
    parser.add_argument("--batches", default="1,4", help="concurrent requests per round, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    add_out_argument(parser, "stream_latency")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Lines.started()
    policy = load_policy("agent", resolve_model_source(args.model))
    params = SamplingParams(temperature=0.7, max_new_tokens=args.tokens)
    worker = SamplingWorker(torch.Generator(), window_s=5.0, max_wait_s=30.0)
    gateway = Gateway({"agent": AgentRoute(policy, params)}, worker).start()
    out(f"# {args.model}: up to {args.tokens} new tokens at T 0.7, through the openai client; 1 thread; "
        f"{args.rounds} rounds, streamed and plain alternating, one seed per round")
    figures: dict[str, dict[str, float]] = {}
    try:
        one_round(gateway, 1, True, 8, seed=0)  # warm-up: the first call pays for lazy set-up
        for batch in (int(b) for b in args.batches.split(",")):
            firsts, wholes, plains, lengths = [], [], [], []
            for r in range(args.rounds):
                streamed = one_round(gateway, batch, True, args.tokens, seed=r)
                plain = one_round(gateway, batch, False, args.tokens, seed=r)
                firsts += [x["first"] for x in streamed]
                wholes += [x["whole"] for x in streamed]
                plains += [x["whole"] for x in plain]
                lengths += [x["tokens"] for x in streamed]
            out(f"batch {batch}: first text {spread(firsts, '6.3f')} s | whole stream {spread(wholes, '6.3f')} s | "
                f"plain answer {spread(plains, '6.3f')} s | {spread(lengths, '4.0f')} tokens")
            figures[f"batch_{batch}"] = {
                "first_s": sorted(firsts)[len(firsts) // 2],
                "whole_stream_s": sorted(wholes)[len(wholes) // 2],
                "plain_s": sorted(plains)[len(plains) // 2],
            }
    finally:
        gateway.close()
        worker.close()
    out.finish(args.out, figures)


if __name__ == "__main__":
    main()
