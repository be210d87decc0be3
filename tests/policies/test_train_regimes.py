"""`train()` end to end with LoRA regimes on a toy task registered for the test."""

import json
from dataclasses import dataclass

import pytest

from team_kit import CountTeam, save_tiny_model
from teamrl.cli import main as cli_main
from teamrl.config import load_config
from teamrl.training.loop import train
from teamrl.workflows.base import Agent
from teamrl.config.tasks import TASKS, TaskEntry, register_task

TASK = "policy_regime_toy"


@dataclass
class ToySettings:
    voters: int = 3


def _team(settings: ToySettings, single_agent: bool = False, max_turns: int = 1, **_) -> CountTeam:
    voters = [Agent(f"voter_{i}", "voter") for i in range(1 if single_agent else settings.voters)]
    agents = voters + ([] if single_agent else [Agent("judge", "judge")])
    return CountTeam(agents, rewarded={a.name for a in agents}, max_turns=max_turns)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    if TASK not in TASKS:
        register_task(TASK, TaskEntry(ToySettings, _team))
    return save_tiny_model(tmp_path_factory.mktemp("base") / "llama")


def _config(tmp_path, base, *extra):
    return load_config(None, [
        f"task.name={TASK}", "workflow.max_turns=1", f"policy.model={base}", "policy.lr=0.01",
        "train.steps=2", "train.batch_size=2", "train.eval_every=0", "train.eval_instances=2",
        "train.warmup_steps=1", "algorithm.k=4", "rollout.max_new_tokens=4", f"output_dir={tmp_path}",
        "run_name=run", *extra])


def test_per_agent_lora_run_writes_an_adapter_per_agent_and_exports(tmp_path, base):
    run = train(_config(tmp_path, base, "regime=per_agent", "policy.lora={r: 2}", "algorithm.kl_coef=0.05"),
                progress=False)
    summary = json.loads((run / "summary.json").read_text())
    agents = ["voter_0", "voter_1", "voter_2", "judge"]
    assert summary["agent_to_policy"] == {a: a for a in agents}
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for agent in agents:
        assert any(f"policy/{agent}/loss" in r for r in rows), agent
        assert any(r.get(f"policy/{agent}/kl_ref") is not None for r in rows), agent  # base reference ran
        folder = run / "checkpoints" / "final" / agent
        assert (folder / "adapter_config.json").exists() and (folder / "adapter_model.safetensors").exists()
        assert not (folder / "model.safetensors").exists()
    assert cli_main(["export", str(run / "checkpoints" / "final"), "--merged", str(tmp_path / "merged")]) == 0
    assert all((tmp_path / "merged" / a / "model.safetensors").exists() for a in agents)


def test_shared_lora_run_evaluates_from_its_checkpoint(tmp_path, base, capsys):
    run = train(_config(tmp_path, base, "policy.lora={r: 2}"), progress=False)
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary["agent_to_policy"].values()) == {"shared"}
    code = cli_main(["eval", str(run / "config.yaml"), "--checkpoint", str(run / "checkpoints" / "final"),
                     "--instances", "2"])
    assert code == 0
    assert 0.0 <= json.loads(capsys.readouterr().out)["success"] <= 1.0
