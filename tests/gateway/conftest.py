"""Fixtures of the gateway tests: a live server over tiny random policies."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from teamrl.gateway import AgentRoute, Gateway, GatewayLimits, SamplingWorker
from teamrl.rollout.builtin_engine import SamplingParams

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from toy import tiny_policy  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_template import CHAT_TEMPLATE  # noqa: E402


@pytest.fixture
def two_policies():
    """per_role: two tiny policies with a chat template, one per role."""
    return {"planner": tiny_policy(seed=1, name="planner", chat_template=CHAT_TEMPLATE),
            "solver": tiny_policy(seed=2, name="solver", chat_template=CHAT_TEMPLATE)}


@pytest.fixture
def gateway(two_policies):
    params = SamplingParams(temperature=1.0, max_new_tokens=12)
    routes = {name: AgentRoute(policy, params) for name, policy in two_policies.items()}
    worker = SamplingWorker(torch.Generator().manual_seed(0), window_s=0.02)
    server = Gateway(routes, worker, GatewayLimits(max_message_chars=2000)).start()
    yield server
    server.close()
    worker.close()
