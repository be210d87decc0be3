"""The Python API (`import teamrl`): config loading, train, a loaded team, and the README's example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import teamrl
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def random_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised tiny model: no warm-up, a training step in a fraction of a second."""
    folder = tmp_path_factory.mktemp("random-model")
    tokenizer = build_char_tokenizer()
    build_tiny_model(tokenizer, hidden_size=32, num_layers=1, num_heads=2,
                     intermediate_size=64).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_import_is_cheap_and_lazy():
    """`import teamrl` loads neither torch nor the training loop; the API's names load on use."""
    code = ("import sys, teamrl; assert 'torch' not in sys.modules, 'torch'; "
            "assert 'teamrl.training.loop' not in sys.modules; teamrl.Team; teamrl.load_config; "
            "assert 'teamrl.training.loop' not in sys.modules; print(sorted(teamrl.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Team" in out and "train" in out


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Trainer'"):
        teamrl.Trainer  # noqa: B018 - the access is the test


def test_load_config_from_name_file_mapping_and_settings(tmp_path):
    by_name = teamrl.load_config("plan_path_team", train={"steps": 5}, seed=3)
    assert (by_name.train.steps, by_name.seed, by_name.task["name"]) == (5, 3, "plan_path")
    assert by_name.train.batch_size == 16  # the file's other train keys are kept
    path = tmp_path / "mine.yaml"
    path.write_text("seed: 7\ntrain: {steps: 2}\n")
    from_file = teamrl.load_config(path, ["algorithm.k=4"])
    assert (from_file.seed, from_file.train.steps, from_file.algorithm.k) == (7, 2, 4)
    from_dict = teamrl.load_config({"seed": 2, "train": {"steps": 9}}, train={"batch_size": 4})
    assert (from_dict.seed, from_dict.train.steps, from_dict.train.batch_size) == (2, 9, 4)
    copied = teamrl.load_config(from_dict, seed=4)
    assert (copied.seed, from_dict.seed, copied.train.steps) == (4, 2, 9)


def test_load_config_names_a_bad_key():
    with pytest.raises(teamrl.ConfigError, match="stepz"):
        teamrl.load_config("plan_path_team", train={"stepz": 5})


def test_result_of_an_unfinished_run_says_how_to_resume(tmp_path):
    with pytest.raises(teamrl.ConfigError, match="resume"):
        teamrl.TrainResult.from_run_dir(tmp_path)


def _tiny(random_model_dir: Path, tmp_path: Path):
    return teamrl.load_config(None, [
        "task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2", "train.steps=1",
        "train.batch_size=2", "train.eval_every=0", "train.eval_instances=4", "algorithm.k=2",
        f"policy.model={random_model_dir}", f"output_dir={tmp_path}", "run_name=run"])


def test_train_then_load_evaluate_and_ask(random_model_dir, tmp_path):
    result = teamrl.train(_tiny(random_model_dir, tmp_path))
    assert result.run_dir == tmp_path / "run" and result.steps == 1
    assert 0.0 <= result.initial_success <= 1.0 and 0.0 <= result.final_success <= 1.0
    with teamrl.Team.load(result.run_dir) as team:
        assert team.agents == list(result.agent_to_policy)
        evaluated = team.evaluate(instances=4)
        assert evaluated.instances == 4 and len(evaluated.episodes) == 4
        assert evaluated.success == pytest.approx(sum(e.success for e in evaluated.episodes) / 4)
        # the loaded team evaluates as the run's own final evaluation did (same weights, greedy, same seed)
        assert evaluated.success == pytest.approx(result.final_success)
        answer = team.ask(team.agents[0], "hello", max_new_tokens=4)
        assert isinstance(answer, str) and answer == team.ask(team.agents[0], "hello", max_new_tokens=4)
        with pytest.raises(teamrl.ConfigError, match="no agent 'nobody'"):
            team.ask("nobody", "hello")


def test_readme_python_example_runs(random_model_dir, tmp_path):
    """The README's Python block, run as written except for a smaller budget and the random tiny model."""
    block = re.search(r"## The Python API\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert block, "README.md lost its '## The Python API' python block"
    code = block.group(1)
    small = (f'train={{"steps": 1, "batch_size": 2, "eval_every": 0, "eval_instances": 4}}, '
             f'task={{"size": 4, "min_distance": 2}}, workflow={{"max_turns": 2}}, algorithm={{"k": 2}}, '
             f'policy={{"model": "{random_model_dir}"}}, output_dir="{tmp_path}"')
    for old, new in [('train={"steps": 20}', small), ("instances=100", "instances=4")]:
        assert old in code, f"the README example no longer holds {old!r}: update this test's budget swap"
        code = code.replace(old, new)
    assert len(code.strip().splitlines()) <= 10
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3 and "->" in lines[0] and 0.0 <= float(lines[1]) <= 1.0


def test_eval_writes_per_instance_results_and_transcripts(random_model_dir, tmp_path, capsys):
    from teamrl.cli import main

    out = tmp_path / "eval"
    args = ["eval", "src/teamrl/configs/plan_path_team.yaml", f"policy.model={random_model_dir}", "task.size=4",
            "task.min_distance=2", "workflow.max_turns=2", "--instances", "3", "--out", str(out)]
    assert main(args) == 0
    import json

    printed = json.loads(capsys.readouterr().out)
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [row["instance"] for row in rows] == [0, 1, 2] and all(row["transcript"] for row in rows)
    assert sum(row["success"] for row in rows) / 3 == pytest.approx(printed["success"])
    assert json.loads((out / "eval.json").read_text())["instances"] == 3
    assert main(args) == 2  # a folder that holds files is refused, and kept as it was
    assert "not an empty folder" in capsys.readouterr().err
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 3
