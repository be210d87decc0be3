"""A training step of a gateway program task (the example planner + solver team, plain openai client) with
`rollout.engine: vllm` on SmolLM2-135M-Instruct, a LoRA adapter per role on one base: what the update scores
is exactly what vLLM sampled (prompt ids, response ids, log-probs as the behaviour policy mu of the rollout
correction), and the trainer's own log-probs of those ids (pi_prox) match mu before the update."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from teamrl.config import load_config
from teamrl.rollout import sampler
from teamrl.rollout.vllm_engine import VllmEngine
from teamrl.training import update
from teamrl.training.loop import train

ROOT = Path(__file__).resolve().parents[2]


def test_a_gateway_program_step_trains_on_exactly_what_vllm_sampled(smollm2, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the example's entry paths are repository-relative
    sampled: list[tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]] = []
    original_batch = VllmEngine.sample_batch

    def recording_batch(self, requests, generator):
        out = original_batch(self, requests, generator)
        sampled.extend((tuple(g.prompt_ids), tuple(g.response_ids), tuple(g.logprobs))
                       for result in out for group in result for g in group)
        return out

    scored: list[tuple[list, dict]] = []
    original_proximal = update.proximal_logprobs

    def recording_proximal(policy, samples, algo, temperature):
        out = original_proximal(policy, samples, algo, temperature)
        scored.append((list(samples), out.logprobs))
        return out

    monkeypatch.setattr(VllmEngine, "sample_batch", recording_batch)
    monkeypatch.setattr(update, "proximal_logprobs", recording_proximal)
    config = load_config(ROOT / "examples" / "gateway" / "openai_team.yaml", [
        f"policy.model={smollm2}", "policy.lora={r: 2, alpha: 4, target_modules: [q_proj, v_proj]}",
        "policy.lr=1e-3", "rollout.engine=vllm", "rollout.vllm_kv_cache_gb=0.5", "rollout.temperature=0.7",
        "rollout.max_new_tokens=6", "algorithm.k=2", "algorithm.drop_zero_signal=false",
        "algorithm.rollout_correction=tis", "train.steps=1", "train.batch_size=1", "train.eval_instances=1",
        "train.warmup_steps=0", "train.threads=1", "train.checkpoint_every=0", f"output_dir={tmp_path}"])
    run = train(config, progress=False)
    assert not sampler._SERVED  # the run closed its engine
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "train/samples" in r)
    assert step["gateway/runs"] == 2 and step["gateway/dropped_runs"] == 0 and step["train/samples"] == 4
    # Every sample the update scored is one vLLM returned, ids and log-probs untouched; each was scored once.
    samples = [s for batch, _ in scored for s in batch]
    assert len(samples) == step["train/samples"] and {s.policy for s in samples} == {"planner", "solver"}
    vllm_outputs = set(sampled)
    for s in samples:
        g = s.generation
        assert (tuple(g.prompt_ids), tuple(g.response_ids), tuple(g.logprobs)) in vllm_outputs
        assert g.temperature == 0.7 and len(g.logprobs) == len(g.response_ids) > 0
    # pi_prox (the trainer's forward of those ids before the update) against mu (vLLM's), per token.
    gaps = [float((prox[id(s)] - torch.tensor(s.generation.logprobs)).abs().max())
            for batch, prox in scored for s in batch]
    assert max(gaps) < 1e-4, gaps
    for role in ("planner", "solver"):
        assert 0 <= step[f"rollout/logprob_gap/{role}"] < 1e-4
        assert abs(step[f"rollout_correction/{role}/is_weight_max"] - 1) < 1e-3, step  # pi_prox / mu, at most
