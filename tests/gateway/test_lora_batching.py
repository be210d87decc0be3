"""Requests of several LoRA policies on one base, pending together at the gateway, share one decode call."""

import torch

from teamrl.config import LoraConfig
from teamrl.gateway.batching import SamplingWorker
from teamrl.policies.loading import Policy
from teamrl.policies.lora import attach_adapters
from teamrl.rollout import builtin_engine as builtin
from teamrl.rollout.builtin_engine import SamplingParams
from toy import tiny_policy


def test_lora_roles_pending_together_are_one_decode_call(monkeypatch):
    base = tiny_policy()
    network = attach_adapters(base.model, {name: LoraConfig(r=2, alpha=4, target_modules=["q_proj", "v_proj"])
                                           for name in ("planner", "solver")})
    network.eval()
    team = [Policy(name, network, base.tokenizer, False, adapter=name) for name in ("planner", "solver")]
    calls = []
    real_open = builtin.open_decoder
    monkeypatch.setattr(builtin, "open_decoder",
                        lambda *a, **kw: calls.append(kw.get("adapter_blocks")) or real_open(*a, **kw))
    params = SamplingParams(temperature=1.0, max_new_tokens=4)
    worker = SamplingWorker(torch.Generator().manual_seed(0), window_s=0.2, flush_at=4)
    try:
        futures = [worker.submit(policy, params, policy.encode_prompt(text))
                   for policy in team for text in ("ab", "xyz")]
        generations = [future.result(timeout=30) for future in futures]
    finally:
        worker.close()
    assert calls == [(["planner", "solver"], [2, 2])]  # one decode over both adapters' rows
    assert worker.batch_sizes == [2, 2] and all(1 <= len(g.response_ids) <= 4 for g in generations)
