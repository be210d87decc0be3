"""A whole run on a tiny Plan-Path config: warm-up, train, eval, checkpoints, CLI."""

import json
import math

import pytest

from teamrl.cli import main as cli_main
from teamrl.config import load_config
from teamrl.training.loop import train
from teamrl.setup.tiny_default import WarmupRecipe, warm_up

TASK = {"name": "plan_path", "size": 4, "min_distance": 2}


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory):
    """A quickly warmed-up tiny model (weak: a few dozen SFT steps)."""
    recipe = WarmupRecipe.for_task(TASK, max_turns=2, steps=30, batch_size=16, lr=3e-3)
    root = tmp_path_factory.mktemp("cache")
    import os
    os.environ["TEAMRL_CACHE"] = str(root)
    try:
        return str(warm_up(recipe, verbose=False))
    finally:
        del os.environ["TEAMRL_CACHE"]


def _config(tmp_path, *extra):
    return load_config(None, [
        "task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2",
        "train.steps=3", "train.batch_size=4", "train.eval_every=2", "train.eval_instances=8",
        "algorithm.k=4", "policy.lr=1e-3", f"output_dir={tmp_path}", "run_name=run", *extra])


def _metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("regime", ["shared", "per_role"])
def test_train_writes_a_complete_run(tmp_path, warm_model, regime):
    run_dir = train(_config(tmp_path, f"regime={regime}"), model_path=warm_model, progress=False)
    rows = _metrics(run_dir)
    losses = [v for r in rows for k, v in r.items() if k.endswith("/loss")]
    assert losses and all(v is not None and math.isfinite(v) for v in losses)
    assert (run_dir / "config.yaml").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert 0.0 <= summary["final_success"] <= 1.0
    expected = {"shared"} if regime == "shared" else {"tool", "plan"}
    assert set(summary["agent_to_policy"].values()) == expected
    for name in expected:
        assert (run_dir / "checkpoints" / "final" / name / "config.json").exists()
    for key in ("adv/zero_signal_frac", "role/tool/reward", "role/plan/reward", "time/tokens_per_s"):
        assert any(key in r for r in rows), key
    assert any("eval/success" in r for r in rows)
    # |advantage| per agent is read after the advantages are assigned (it was 0 at every step before)
    assert any(r.get(f"role/{agent}/adv_abs", 0) > 0 for r in rows for agent in ("tool", "plan"))
    # each policy only ever receives its own roles' samples
    policy_keys = {k.split("/")[1] for r in rows for k in r if k.startswith("policy/")}
    assert policy_keys and policy_keys <= expected


def test_cli_eval_scores_a_checkpoint(tmp_path, warm_model, capsys):
    run_dir = train(_config(tmp_path, "train.steps=1"), model_path=warm_model, progress=False)
    config = tmp_path / "run" / "config.yaml"
    code = cli_main(["eval", str(config), "--checkpoint", str(run_dir / "checkpoints" / "final"),
                     "--instances", "10"])
    assert code == 0
    assert 0.0 <= json.loads(capsys.readouterr().out)["success"] <= 1.0


def test_cli_reports_bad_config_clearly(tmp_path, capsys):
    assert cli_main(["train", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err
