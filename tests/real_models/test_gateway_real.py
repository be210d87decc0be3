"""The gateway's example team (plain openai client, planner + solver) trained one step on SmolLM2-135M-Instruct,
a LoRA adapter per role on one base, through the real HTTP server: a real chat template applied by teamrl,
real token ids and log-probs recorded per call, a few tokens per call to keep it short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from teamrl.config import load_config
from teamrl.training.loop import train

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gateway"


@pytest.mark.parametrize("config_file, entry", [
    ("openai_team.yaml", None),  # the plain client, sync
    ("openai_team.yaml", "examples/gateway/openai_team.py:run_episode_async"),  # AsyncOpenAI
    ("langgraph_team.yaml", None),  # the same team as a LangGraph graph
])
def test_the_example_teams_train_a_step_on_smollm2_through_the_gateway(smollm2, tmp_path, monkeypatch, config_file,
                                                                       entry):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # the example's entry paths are repository-relative
    config = load_config(EXAMPLES / config_file, [*([f"task.entry={entry}"] if entry else []), 
        f"policy.model={smollm2}", "policy.lora={r: 2, alpha: 4, target_modules: [q_proj, v_proj]}",
        "policy.lr=1e-3", "rollout.temperature=0.7", "rollout.max_new_tokens=6", "algorithm.k=2",
        "algorithm.drop_zero_signal=false", "train.steps=1", "train.batch_size=1", "train.eval_instances=1",
        "train.warmup_steps=0", "train.threads=1", "train.checkpoint_every=0", f"output_dir={tmp_path}"])
    run = train(config, progress=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "train/samples" in r)
    # tree sampling: K = 2 free runs (level 0, the planner's call), then K replaying the committed plan (the solver's)
    assert step["gateway/runs"] == 2 and step["gateway/branch_runs"] == 2 and step["gateway/dropped_runs"] == 0
    assert step["train/samples"] == 4 and step["gateway/nondeterministic_runs"] == 0
    moved = {}
    for role in ("planner", "solver"):
        folder = run / "checkpoints" / "final" / role
        adapter = load_file(str(folder / "adapter_model.safetensors"))
        assert adapter and all(".lora_" in key for key in adapter)  # the adapter alone, not the 135M base
        # PEFT starts every B at zero: a non-zero B is this role's own update, from the gateway's samples
        moved[role] = any(value.abs().max() > 0 for key, value in adapter.items() if "lora_B" in key)
        assert moved[role] == (step.get(f"policy/{role}/grad_norm", 0.0) > 0), role
    assert any(moved.values())  # at least one role had a reward spread at this seed and learned from it
