"""One end-to-end training step of the example teams through the gateway, on a tiny random model."""

from __future__ import annotations

import json

import pytest
import torch

from teamrl.config import load_config
from teamrl.policies.loading import load_policy
from teamrl.training.loop import train

from conftest import CHAT_TEMPLATE
from toy import tiny_policy


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny random chat model saved as an HF folder (no warm-up: a step takes seconds)."""
    folder = tmp_path_factory.mktemp("gateway-model")
    policy = tiny_policy(seed=3, chat_template=CHAT_TEMPLATE)
    policy.network.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("config_file, entry", [
    ("examples/gateway/openai_team.yaml", None),
    ("examples/gateway/openai_team.yaml", "examples/gateway/openai_team.py:run_episode_async"),
    ("examples/gateway/langgraph_team.yaml", None),
])
def test_a_training_step_of_the_example_team(model_dir, tmp_path, config_file, entry):
    overrides = [f"output_dir={tmp_path}", "train.steps=1", "train.batch_size=2", "algorithm.k=3",
                 "train.eval_instances=2", "train.checkpoint_every=0"]
    config = load_config(config_file, overrides + ([f"task.entry={entry}"] if entry else []))
    run = train(config, model_path=str(model_dir), progress=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "train/samples" in r)
    assert step["gateway/runs"] == 6 and step["gateway/dropped_runs"] == 0
    assert step["train/samples"] == 6 * 2  # planner and solver, once each per run
    assert step["gateway/planner/groups"] == 2 and step["gateway/nondeterministic_runs"] == 0
    # A policy whose groups all tied has nothing to learn this step (no loss row); the others trained.
    trained = [p for p in ("planner", "solver") if f"policy/{p}/loss" in step]
    tied = [p for p in ("planner", "solver")
            if step[f"gateway/{p}/zero_variance_groups"] == step[f"gateway/{p}/groups"]]
    assert trained and sorted(trained + tied) == ["planner", "solver"]
    before = load_policy("x", str(model_dir)).network.state_dict()
    for name in trained:
        after = load_policy(name, str(run / "checkpoints" / "final" / name)).network.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before)  # the update reached the weights
