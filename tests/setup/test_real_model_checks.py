"""The load-time warnings for settings that waste a real pretrained LLM (teamrl.setup.real_model_checks)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from teamrl.config import load_config
from teamrl.setup.real_model_checks import real_model_warnings

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs"
CHAT_MATH = ["workflow.prompt_style=chat", "rollout.temperature=0.5", "rollout.max_new_tokens=64",
             "task.source=arithmetic:1"]


def fake_policy(vocabulary: int, template: bool) -> SimpleNamespace:
    """What the checks read of a policy: its vocabulary size, template and device."""
    return SimpleNamespace(tokenizer=[0] * vocabulary, use_chat_template=template, device=torch.device("cpu"))


def warnings_for(overrides: list[str], template: bool, vocabulary: int = 49_152) -> list[str]:
    config = load_config(CONFIGS / "math_team.yaml", ["regime=shared", *overrides])
    mapping = {"reasoner": "shared", "tool": "shared"}
    return real_model_warnings(config, {"shared": fake_policy(vocabulary, template)}, mapping,
                               {"reasoner": "reasoner", "tool": "tool"})


def test_real_settings_on_an_instruct_model_give_no_warning():
    assert warnings_for(CHAT_MATH, template=True) == []


def test_tiny_model_settings_on_a_real_model_are_each_named():
    text = " ".join(warnings_for(["rollout.temperature=1.0", "rollout.max_new_tokens=16"], template=True))
    assert "prompt_style is compact" in text and "temperature 1" in text and "max_new_tokens=16" in text


def test_a_character_model_gets_none_of_the_real_model_warnings():
    assert warnings_for(["rollout.temperature=1.0", "rollout.max_new_tokens=16"], template=False, vocabulary=64) == []


def test_a_base_model_without_stop_strings_or_worked_examples_is_told_both_fixes():
    text = " ".join(warnings_for(CHAT_MATH, template=False))
    assert 'rollout.stop=["\\n\\n"]' in text and "task.worked_examples=true" in text
    assert warnings_for([*CHAT_MATH, 'rollout.stop=["\\n\\n"]', "task.worked_examples=true"], template=False) == []


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_pure_low_precision_training_on_cpu_points_to_autocast_where_the_cpu_has_bf16_units(dtype, monkeypatch):
    monkeypatch.setattr("teamrl.setup.real_model_checks.cpu_has_bf16_matmul", lambda: True)
    text = " ".join(warnings_for([*CHAT_MATH, f"policy.dtype={dtype}"], template=True))
    assert "no float32 master copy" in text and "algorithm.autocast=bf16" in text
    monkeypatch.setattr("teamrl.setup.real_model_checks.cpu_has_bf16_matmul", lambda: False)
    text = " ".join(warnings_for([*CHAT_MATH, f"policy.dtype={dtype}"], template=True))
    assert "no float32 master copy" in text and "autocast" not in text  # emulated bf16 would be slower still


def test_bf16_autocast_on_a_cpu_without_bf16_units_says_it_is_slower(monkeypatch):
    monkeypatch.setattr("teamrl.setup.real_model_checks.cpu_has_bf16_matmul", lambda: False)
    (text,) = warnings_for([*CHAT_MATH, "algorithm.autocast=bf16"], template=True)
    assert "without bf16 matmul units" in text and "set algorithm.autocast=off" in text
    monkeypatch.setattr("teamrl.setup.real_model_checks.cpu_has_bf16_matmul", lambda: True)
    assert warnings_for([*CHAT_MATH, "algorithm.autocast=bf16"], template=True) == []



def test_a_base_model_gets_a_stop_and_worked_examples_where_its_task_has_them():
    from teamrl.setup.model_sources import is_named_base_model
    from teamrl.setup.real_model_checks import base_model_settings, offers_worked_examples

    assert offers_worked_examples("math") and not offers_worked_examples("split_calc")
    assert not offers_worked_examples("no_such_task")
    assert base_model_settings("math") == ('rollout.stop=["\\n\\n"]', "task.worked_examples=true")
    assert base_model_settings("split_calc") == ('rollout.stop=["\\n\\n"]',)
    assert is_named_base_model("gemma-3-270m") and not is_named_base_model("smollm2-135m-instruct")
    assert not is_named_base_model("/some/folder")


def test_a_program_task_gets_no_prompt_style_warning():
    """A program writes its own prompts: workflow.prompt_style does nothing there, so nothing is said of it."""
    config = load_config(None, ["task.name=program", "task.module=teamrl.gateway",
                                "task.entry=examples/gateway/openai_team.py:run_episode",
                                "task.agents=[planner, solver]", "rollout.temperature=0.6",
                                "rollout.max_new_tokens=64"])
    assert config.workflow.prompt_style == "compact"
    mapping = {"planner": "shared", "solver": "shared"}
    text = " ".join(real_model_warnings(config, {"shared": fake_policy(49_152, True)}, mapping,
                                        {"planner": "planner", "solver": "solver"}))
    assert "prompt_style" not in text
