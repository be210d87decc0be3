"""The per-domain tiny-model configs load, and warm up on demonstrations of their own task."""

from __future__ import annotations

import inspect
import itertools
from pathlib import Path

import pytest

from teamrl.config import load_config
from teamrl.policies.tiny_model import CHARACTERS
from teamrl.setup import recipe_digest
from teamrl.setup.tiny_default import WarmupRecipe, demo_batches

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs"


@pytest.mark.parametrize("domain, agents", [("sokoban", {"tool", "plan"}), ("sudoku", {"tool", "plan"}),
                                            ("math", {"reasoner", "tool"}), ("code", {"coder", "tester"})])
def test_domain_config_warms_up_on_its_own_demos(domain, agents):
    config = load_config(CONFIGS / f"{domain}_team.yaml", [])
    assert config.task["name"] == domain and config.policy.model == "tiny-default"
    assert config.workflow.prompt_style == "compact"
    recipe = WarmupRecipe.for_task(config.task, config.workflow.max_turns)
    batches = list(itertools.islice(demo_batches(recipe), len(agents) + 1))  # every team agent, then single
    seen = set()
    for batch in batches:
        assert len(batch) == recipe.batch_size
        for prompt, response in batch:
            assert prompt.endswith("\n>") and response
            assert set(prompt + response) <= set(CHARACTERS)
            seen.add(prompt.split("\n", 1)[0])
            # Prompt and response fit the rollout budget the config gives the model.
            assert len(response) <= config.rollout.max_new_tokens
    assert seen == agents


@pytest.mark.parametrize("edited, changes, keeps", [
    ("teamrl.tasks.sokoban", "sokoban", "plan_path"),
    ("teamrl.workflows.tool_plan", "sudoku", "code"),
    ("teamrl.tasks.code_procedural", "code", "sokoban"),
    ("teamrl.policies.tiny_model", "math", None),
])
def test_warmup_cache_key_follows_the_task_own_code(monkeypatch, edited, changes, keeps):
    """Editing a module that shapes a task's demos retrains its warm-up; another task's cache stays."""
    def digests() -> dict[str, str]:
        return {t: WarmupRecipe.for_task({"name": t}, 3).digest() for t in (changes, keeps) if t}

    before = digests()
    real = inspect.getsource
    monkeypatch.setattr(recipe_digest.inspect, "getsource",
                        lambda obj: real(obj) + ("\n# edited" if getattr(obj, "__name__", "") == edited else ""))
    after = digests()
    assert after[changes] != before[changes]
    if keeps:
        assert after[keeps] == before[keeps]
