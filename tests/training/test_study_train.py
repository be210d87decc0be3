"""The study's voting workflow end to end: tiny warm-up on scripted voters, two training steps."""

import json
import math

import pytest

pytest.importorskip("math_verify")

from teamrl.config import load_config  # noqa: E402
from teamrl.training.loop import train  # noqa: E402
from teamrl.setup.tiny_default import WarmupRecipe, warm_up  # noqa: E402

TASK = {"name": "math", "source": "arithmetic:1,2"}


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory):
    """A quickly warmed-up tiny model (weak: a few dozen SFT steps on the voting team's demos)."""
    import os

    recipe = WarmupRecipe.for_task(TASK, max_turns=1, workflow="voting", steps=30, batch_size=16, lr=3e-3)
    os.environ["TEAMRL_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    try:
        return str(warm_up(recipe, verbose=False))
    finally:
        del os.environ["TEAMRL_CACHE"]


@pytest.mark.parametrize("regime", ["shared", "per_role"])
def test_voting_trains_two_steps(tmp_path, warm_model, regime):
    config = load_config(None, [
        "task.name=math", "task.source=arithmetic:1,2", "workflow.name=voting", "workflow.max_turns=1",
        "rollout.max_new_tokens=16", "train.steps=2", "train.batch_size=3", "train.eval_every=0",
        "train.eval_instances=6", "algorithm.k=3", "policy.lr=1e-3", f"regime={regime}",
        f"output_dir={tmp_path}", "run_name=run"])
    run_dir = train(config, model_path=warm_model, progress=False)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    losses = [v for r in rows for k, v in r.items() if k.endswith("/loss")]
    assert losses and all(v is not None and math.isfinite(v) for v in losses)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 2 and 0.0 <= summary["final_success"] <= 1.0
    assert {"generator_0", "generator_1", "generator_2", "aggregator"} <= set(summary["agent_to_policy"])
    expected = {"shared"} if regime == "shared" else {"generator", "aggregator"}
    assert set(summary["agent_to_policy"].values()) == expected
    for agent in ("generator_0", "aggregator"):
        assert any(f"role/{agent}/reward" in r for r in rows)
