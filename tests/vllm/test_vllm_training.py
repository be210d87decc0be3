"""AT-GRPO with rollout.engine: vllm trains, in the direction the built-in engine does, and the loop logs
the trainer-vs-sampler log-prob gap."""

from __future__ import annotations

import json
import random
from statistics import mean

import torch

from teamrl.config import AlgorithmConfig, PolicyConfig, TrainConfig, load_config
from teamrl.rollout import engine_routing, sampler
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.rollout.tree import RewardWeights, run_episodes
from teamrl.training.credit import assign_advantages, trainable
from teamrl.training.loop import train
from teamrl.training.update import make_optimizer, update_policy
from toy import ToyWorkflow
from vllm_helpers import small_policy

STEPS = 12


def reward_curve(use_vllm: bool) -> list[float]:
    """Mean team reward ('x' count) per step of tree-grouped GRPO on the toy team, one shared policy."""
    policy = small_policy("llama", seed=0, sharpen=1.0)
    if use_vllm:
        engine_routing.serve_with_vllm({"p": policy}, kv_cache_gb=0.125)
    try:
        workflow, algo = ToyWorkflow(max_turns=1), AlgorithmConfig(k=8, minibatch_size=64)
        opt = make_optimizer(policy, PolicyConfig(lr=1e-2), TrainConfig(steps=STEPS, warmup_steps=1), False)
        gen, rng = torch.Generator().manual_seed(0), random.Random(0)
        curve = []
        for _ in range(STEPS):
            samples, episodes = run_episodes(workflow, list(range(8)), "train", {"p": policy}, {"a": "p", "b": "p"},
                                             SamplingParams(temperature=1.0, max_new_tokens=4), algo.k,
                                             RewardWeights(1.0, 0.0), gen, rng)
            assign_advantages(samples, episodes, algo)
            update_policy(opt, trainable(samples, True), algo, 1.0, 1.0, rng)
            curve.append(mean(s.outcome.team for s in samples))
        return curve
    finally:
        sampler.release({"p": policy})


def test_vllm_learns_the_toy_reward_as_the_builtin_engine_does():
    builtin, vllm = reward_curve(False), reward_curve(True)
    gains = {name: mean(c[-3:]) - mean(c[:3]) for name, c in (("builtin", builtin), ("vllm", vllm))}
    assert gains["builtin"] > 0.3, (gains, builtin)
    assert gains["vllm"] > 0.3, (gains, vllm)  # same direction, similar size
    assert 0.4 < gains["vllm"] / gains["builtin"] < 2.5, (gains, builtin, vllm)


def test_a_run_with_engine_vllm_logs_the_logprob_gap(tmp_path, monkeypatch):
    from teamrl.config import tasks as registry

    folder = tmp_path / "model"
    policy = small_policy("llama", sharpen=1.0)
    policy.network.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)
    monkeypatch.setattr(registry, "TASKS", dict(registry.TASKS))
    registry.register_task("toy", workflow=ToyWorkflow)
    config = load_config(None, ["task.name=toy", "workflow.max_turns=2", "rollout.max_new_tokens=6",
                                "rollout.engine=vllm", "rollout.vllm_kv_cache_gb=0.125", "train.batch_size=2",
                                "train.eval_instances=2", "algorithm.k=4", "run_name=run", "regime=per_role",
                                "train.steps=2", "train.eval_every=0", f"policy.model={folder}",
                                f"output_dir={tmp_path}"])
    run = train(config, progress=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    gaps = [r[f"rollout/logprob_gap/{name}"] for r in rows if "train/success" in r for name in ("writer", "critic")]
    assert len(gaps) == 4 and all(0 <= g < 1e-4 for g in gaps), gaps
    assert not (run / "alerts.jsonl").exists() or "logprob_gap" not in (run / "alerts.jsonl").read_text()
    assert not sampler._SERVED  # the run closed its engines
