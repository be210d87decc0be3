"""A user's own task: registered with the keyword API, loaded by `task.module`, trained by `teamrl train`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from teamrl.config import ConfigError, load_config
from teamrl.config import tasks as registry
from teamrl.workflows.base import Agent, Outcome

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def private_registry(monkeypatch):
    """Each test registers into its own copy of the task table."""
    monkeypatch.setattr(registry, "TASKS", dict(registry.TASKS))


class Echo:
    """One agent that must repeat a digit; takes no constructor arguments at all."""

    agents = [Agent("echo", "echo")]
    parallel = False
    max_turns = 5

    def new_state(self, split, index):
        return {"digit": str(index % 10), "said": None}

    def render(self, agent, state):
        return f"say {state['digit']}>"

    def apply(self, agent, state, response):
        state["said"] = response.strip()[:1]
        return Outcome(team=float(state["said"] == state["digit"]), local=0.0)

    def is_done(self, state):
        return state["said"] is not None

    def success(self, state):
        return state["said"] == state["digit"]


@dataclass
class EchoSettings:
    loud: bool = False
    """Unused; a task key to check."""


def test_passing_a_settings_class_positionally_says_how_to_register():
    with pytest.raises(TypeError, match=r"register_task\('mine', workflow=YourWorkflow, settings=YourSettings\)"):
        registry.register_task("mine", EchoSettings)


def test_keyword_registration_sets_max_turns_the_factory_does_not_take():
    registry.register_task("echo", workflow=Echo, settings=EchoSettings)
    config = load_config(None, ["task.name=echo", "task.loud=true", "workflow.max_turns=2"])
    from teamrl.setup.team import build_workflow

    workflow = build_workflow(config)
    assert isinstance(workflow, Echo) and workflow.max_turns == 2
    assert config.task_settings() == EchoSettings(loud=True)


def test_factory_gets_settings_and_only_the_keywords_it_declares():
    seen = {}

    def make(settings, max_turns=1, prompt_style="compact"):
        seen.update(settings=settings, max_turns=max_turns, prompt_style=prompt_style)
        return Echo()

    entry = registry.register_task("echo2", workflow=make, settings=EchoSettings)
    workflow = entry.build("team", EchoSettings(), max_turns=4, prompt_style="chat", format_bonus=0.3, runner=None)
    assert seen == {"settings": EchoSettings(), "max_turns": 4, "prompt_style": "chat"}
    assert workflow.max_turns == 5  # the factory took max_turns, so the workflow's own value stands


def test_unknown_task_key_and_missing_single_agent_fail_at_load_with_the_fix():
    registry.register_task("echo", workflow=Echo, settings=EchoSettings)
    with pytest.raises(ConfigError, match="unknown key.*task.lod.*valid keys: name, loud"):
        load_config(None, ["task.name=echo", "task.lod=1"])
    with pytest.raises(ConfigError, match="workflow.name.*one of team for task 'echo'"):
        load_config(None, ["task.name=echo", "workflow.name=single"])


def test_task_module_by_path_and_by_name(tmp_path, monkeypatch):
    module = tmp_path / "my_tasks.py"
    module.write_text(textwrap.dedent("""
        from teamrl.config.tasks import register_task
        from test_user_task import Echo
        register_task("echo_file", workflow=Echo)
    """))
    config = load_config(None, [f"task.module={module}", "task.name=echo_file"])
    assert config.task_settings() == registry.NoSettings()
    load_config(None, [f"task.module={module}", "task.name=echo_file"])  # a second load imports it once
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "my_pkg_tasks.py").write_text(module.read_text().replace("echo_file", "echo_mod"))
    assert load_config(None, ["task.module=my_pkg_tasks", "task.name=echo_mod"]).task["name"] == "echo_mod"


@pytest.mark.parametrize("module, message", [
    ("no_such_module_xyz", "could not be imported.*PYTHONPATH"),
    ("/nowhere/tasks.py", "no such file"),
])
def test_task_module_that_cannot_be_loaded_says_so(module, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [f"task.module={module}", "task.name=x"])


def test_task_module_that_is_no_python_file_says_so(tmp_path):
    module = tmp_path / "tasks.txt"
    module.write_text("register_task('echo_txt', workflow=Echo)\n")
    with pytest.raises(ConfigError, match="is not a Python module; give a .py file"):
        load_config(None, [f"task.module={module}", "task.name=echo_txt"])


def test_task_module_that_registers_another_name_lists_what_it_registered(tmp_path):
    module = tmp_path / "other.py"
    module.write_text("from teamrl.config.tasks import register_task\n"
                      "from test_user_task import Echo\nregister_task('echo_other', workflow=Echo)\n")
    with pytest.raises(ConfigError, match="registered no task named 'ehco'.*echo_other"):
        load_config(None, [f"task.module={module}", "task.name=ehco"])


def test_tiny_default_without_a_script_says_how_to_add_one():
    registry.register_task("echo", workflow=Echo)
    from teamrl.setup.tiny_default import WarmupRecipe, demo_batches

    with pytest.raises(ValueError, match="script="):
        next(demo_batches(WarmupRecipe.for_task({"name": "echo"}, 1, steps=1)))


def test_scripted_agents_warm_up_the_tiny_default_on_a_user_task():
    entry = registry.register_task("echo", workflow=Echo, script=lambda agent, state, rng: state["digit"])
    from teamrl.setup.tiny_default import WarmupRecipe, demo_batches

    batch = next(demo_batches(WarmupRecipe.for_task({"name": "echo"}, 1, steps=1, batch_size=4)))
    assert [(p[-2], r) for p, r in batch] == [(p[-2], p[-2]) for p, _ in batch]  # "say D>" -> "D"
    assert __name__ in entry.sources  # the warm-up cache key hashes the user's module


@pytest.mark.slow
def test_relay_example_trains_end_to_end_with_teamrl_train(tmp_path):
    """The docs' example config through the real CLI, on a tiny budget (the learning curve is in the docs)."""
    env = dict(os.environ, TEAMRL_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "teamrl.cli", "train", "examples/relay_team.yaml", f"output_dir={tmp_path}/runs",
         "run_name=smoke", "policy.warmup_sft_steps=5", "train.steps=2", "train.batch_size=2",
         "train.eval_every=0", "train.eval_instances=4", "algorithm.k=2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    run = tmp_path / "runs" / "smoke"
    assert (run / "summary.json").is_file() and (run / "checkpoints" / "final").is_dir()
    assert "module: examples/relay_team.py" in (run / "config.yaml").read_text()
