"""The stream_latency benchmark's rounds on a tiny random model: every request answered, the first streamed
text no later than the whole stream."""

import sys
from pathlib import Path

import torch

from benchmarks.stream_latency import one_round
from teamrl.gateway import AgentRoute, Gateway, SamplingWorker
from teamrl.rollout.builtin_engine import SamplingParams

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
from gateway_template import CHAT_TEMPLATE  # noqa: E402
from toy import tiny_policy  # noqa: E402


def test_rounds_time_streamed_and_plain_answers():
    policy = tiny_policy(seed=1, name="agent", chat_template=CHAT_TEMPLATE)
    worker = SamplingWorker(torch.Generator(), window_s=5.0, max_wait_s=30.0)
    gateway = Gateway({"agent": AgentRoute(policy, SamplingParams(max_new_tokens=16))}, worker).start()
    try:
        streamed = one_round(gateway, 3, True, 16, seed=0)
        plain = one_round(gateway, 3, False, 16, seed=0)
    finally:
        gateway.close()
        worker.close()
    assert worker.batch_sizes == [3, 3]  # each round's requests in one engine call
    assert all(0 < r["first"] <= r["whole"] and 1 <= r["tokens"] <= 16 for r in streamed)
    assert all(r["whole"] > 0 and 1 <= r["tokens"] <= 16 for r in plain)
