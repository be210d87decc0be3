"""Synthetic update inputs shared by the backend and data-parallel tests: samples and an optimizer."""

from __future__ import annotations

import torch

from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.rollout.builtin_engine import Generation
from teamrl.rollout.tree import Sample
from teamrl.training.update import PolicyOptimizer
from teamrl.workflows.base import Outcome


def synthetic_samples(policy: str = "p", roles: tuple[str, ...] = ("plan", "tool"), seed: int = 7,
                      prompts: int = 5) -> list[Sample]:
    """Groups of 3 candidates per prompt, alternating roles, responses of very unequal lengths.

    Old log-probs sit away from the model's, so ratios differ from 1 and some get clipped.
    """
    gen = torch.Generator().manual_seed(seed)
    samples = []
    for i in range(prompts):
        prompt = torch.randint(4, 90, (6 + i,), generator=gen).tolist()
        role = roles[i % len(roles)]
        for k in range(3):
            length = [1, 9, 4, 13, 2][(i + k) % 5]
            response = torch.randint(4, 90, (length,), generator=gen).tolist()
            logprobs = (-4.5 + 0.3 * torch.randn(length, generator=gen)).tolist()
            generation = Generation(prompt, response, logprobs, logprobs, "", True)
            samples.append(Sample(generation, Outcome(0.0, 0.0), 0.0, i, i, 0, role, role, policy,
                                  advantage=float(torch.randn(1, generator=gen))))
    return samples


def policy_optimizer(name: str = "p", seed: int = 3, lr: float = 1e-2) -> PolicyOptimizer:
    """A 1-layer tiny Llama with AdamW and a constant schedule (closure: must travel by cloudpickle)."""
    tok = build_char_tokenizer()
    model = build_tiny_model(tok, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    return PolicyOptimizer(Policy(name, model, tok, False), optimizer, scheduler, None)


def lora_optimizers(names: tuple[str, ...], seed: int = 3, with_reference: bool = True) -> dict[str, PolicyOptimizer]:
    """One LoRA adapter per name on one shared tiny base, each with its own optimizer."""
    from teamrl.config import LoraConfig, PolicyConfig, TrainConfig
    from teamrl.policies.lora import attach_adapters
    from teamrl.training.update import make_optimizer

    tok = build_char_tokenizer()
    base = build_tiny_model(tok, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, seed=seed)
    network = attach_adapters(base, {name: LoraConfig(r=4) for name in names})
    torch.manual_seed(seed)  # PEFT zero-initialises B: give it values so that A gets gradients too
    with torch.no_grad():
        for pname, param in network.named_parameters():
            if "lora_B" in pname:
                param.normal_(0, 0.05)
    pcfg, tcfg = PolicyConfig(lr=1e-2), TrainConfig(warmup_steps=0)
    return {name: make_optimizer(Policy(name, network, tok, False, adapter=name), pcfg, tcfg, with_reference)
            for name in names}
