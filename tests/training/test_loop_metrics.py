"""What the loop logs on a real tiny run: per-agent |advantage| after the advantages are assigned, and
the step of the best held-out score (the earliest evaluation reaching it, as checkpoints/best)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from teamrl.config import load_config
from teamrl.training import loop as loop_module
from teamrl.training.loop import train

OVERRIDES = ["task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2",
             "rollout.max_new_tokens=6", "train.batch_size=2", "train.eval_instances=2", "algorithm.k=4",
             "run_name=run"]


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_agent_adv_abs_is_the_mean_abs_advantage_of_its_samples(tmp_path, random_model_dir, monkeypatch):
    # The toy team's rewards (count of 'x', length) differ between any two samples of a random model, so
    # every group has a reward spread; Plan-Path's verifiers give a random model's garbage one flat reward.
    from teamrl.config import tasks as registry
    from toy import ToyWorkflow

    monkeypatch.setattr(registry, "TASKS", dict(registry.TASKS))
    registry.register_task("toy", workflow=ToyWorkflow)
    config = load_config(None, ["task.name=toy", "workflow.max_turns=2", "rollout.max_new_tokens=6",
                                "train.batch_size=2", "train.eval_instances=2", "algorithm.k=4", "run_name=run",
                                "regime=per_role", "train.steps=3", "train.eval_every=0",
                                f"policy.model={random_model_dir}", f"output_dir={tmp_path}"])
    rows = [r for r in _rows(train(config, progress=False)) if "train/success" in r]
    roles = {"a": "writer", "b": "critic"}
    agents = {k.split("/")[1] for r in rows for k in r if k.startswith("role/") and k.endswith("/adv_abs")}
    assert agents == set(roles)
    # diag/role/<role>/adv_abs is computed after the update from the same samples; one agent per role
    # here, so the two must agree, and they are not zero when the groups have a reward spread.
    for row in rows:
        for agent, role in roles.items():
            assert row[f"role/{agent}/adv_abs"] == pytest.approx(row[f"diag/role/{role}/adv_abs"], abs=1e-6)
    assert all(r["adv/adv_abs_max"] > 0 for r in rows)
    assert all(min(r[f"role/{a}/adv_abs"] for a in agents) > 0 for r in rows)


def _scripted_evaluations(monkeypatch, successes: list[float]) -> None:
    scores = iter(successes)
    monkeypatch.setattr(loop_module, "evaluate", lambda *args, **kwargs: (
        {"success": next(scores), "team_return": 0.0, "turns": 1.0}, []))


@pytest.mark.parametrize("successes, best_step", [
    ([0.5, 0.5, 0.5], 0),      # never beaten: the initial model
    ([0.25, 0.5, 0.5], 2),     # the final evaluation ties step 2: the earlier step stays the best
    ([0.25, 0.5, 0.75], 4),    # the final evaluation is strictly better
])
def test_the_best_step_is_the_earliest_evaluation_reaching_the_best(tmp_path, random_model_dir, monkeypatch,
                                                                    successes, best_step):
    _scripted_evaluations(monkeypatch, successes)
    config = load_config(None, [*OVERRIDES, "train.steps=4", "train.eval_every=2", "algorithm.k=2",
                                "algorithm.drop_zero_signal=false", "algorithm.entropy_coef=0.05", "policy.lr=1e-2",
                                f"policy.model={random_model_dir}", f"output_dir={tmp_path}"])
    run = train(config, progress=False)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["best_step"] == best_step and summary["best_success"] == max(successes)
    # checkpoints/best holds the weights of that step (every step moves them: entropy bonus, no dropping).
    best, final, initial = (_weights(folder / "model.safetensors") for folder in
                            (run / "checkpoints" / "best" / "shared", run / "checkpoints" / "final" / "shared",
                             random_model_dir))
    assert _same(best, initial) == (best_step == 0)
    assert _same(best, final) == (best_step == 4)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path))


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
