"""An engine that holds a copy of the weights (vLLM) must see every update, fused AdamW included.

A fused AdamW step writes the weights without bumping their version counters, so the vLLM engine's
change check (version counters) missed every update after the first on merged main: its sampler's
log-probs drifted from the trainer's and `engine: vllm` stopped learning (tests/vllm). The update now
notes each step (`rollout.sampler.note_update`); this test runs in the main venv, without vLLM.
"""

import random

import torch
from update_fixtures import policy_optimizer, synthetic_samples

from teamrl.config import AlgorithmConfig
from teamrl.rollout.sampler import updates_noted
from teamrl.training.update import adamw, update_policy


def test_every_update_is_noted_with_a_fused_optimizer():
    state = policy_optimizer()
    params = [p for p in state.policy.model.parameters() if p.requires_grad]
    state.optimizer = adamw(params, lr=1e-2, weight_decay=0.0, impl="fused")
    state.scheduler = torch.optim.lr_scheduler.LambdaLR(state.optimizer, lambda step: 1.0)
    before = [p.detach().clone() for p in params]
    noted = updates_noted(state.policy)
    algo = AlgorithmConfig(minibatch_size=1024)  # one minibatch: one optimizer step per update
    for step in range(1, 3):
        update_policy(state, synthetic_samples(), algo, 1.0, 0.5, random.Random(step))
        assert updates_noted(state.policy) == noted + step
    assert any(not torch.equal(b, p) for b, p in zip(before, params))  # the steps did change the weights
