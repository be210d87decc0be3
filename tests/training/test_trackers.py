"""Experiment trackers (report_to): config checks; each backend's run read back from its own files,
also across a resume; one tiny training run logging to every installed tracker."""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path

import pytest

# trackio fixes its folder (TRACKIO_DIR) when first imported: a scratch one, before any test imports it.
if "trackio" not in sys.modules:
    os.environ["TRACKIO_DIR"] = tempfile.mkdtemp(prefix="teamrl-test-trackio-")

from tracker_files import (tensorboard_scalars, trackio_config, trackio_rows, wandb_history,  # noqa: E402
                           wandb_run)

from teamrl.config import ConfigError, load_config  # noqa: E402
from teamrl.config import report_to  # noqa: E402
from teamrl.training.trackers import BACKENDS, open_trackers, registry, resolve_report_to  # noqa: E402

CONFIG = {"seed": 3, "train": {"steps": 4, "resume": ""}, "roles": {}, "task": {"name": "plan_path"}}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """The trackers' own defaults (offline W&B, sqlite MLflow in the run directory), whatever the shell set."""
    for name in ("WANDB_MODE", "WANDB_DIR", "MLFLOW_TRACKING_URI", "TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL"):
        monkeypatch.delenv(name, raising=False)


def need(name: str) -> None:
    if not report_to.installed(name):
        pytest.skip(f"{name} is not installed (pip install 'teamrl[{BACKENDS[name].extra}]')")


def row(step: int, offset: float = 0.0) -> dict[str, float | None]:
    return {"train/success": step / 4 + offset, "role/tool/reward": -1.0 - step, "eval/lost": math.nan,
            "adv/none": None}


def wanted(steps, offset: float = 0.0) -> dict[int, dict[str, float]]:
    """What a tracker must hold for row(step): the finite values only."""
    return {s: {"train/success": s / 4 + offset, "role/tool/reward": -1.0 - s} for s in steps}


def drive(name: str, path: Path, steps, offset: float = 0.0, resume_from: int | None = None,
          failed: bool = False) -> dict:
    """Open tracker `name` for the run in `path`, log row(step) for each step, close; its record."""
    trackers = open_trackers([name], path, "teamrl-test", CONFIG, resume_from)
    for step in steps:
        trackers.log(step, row(step, offset))
    trackers.close(failed)
    return json.loads((path / "trackers.json").read_text())[name]


# --- config --------------------------------------------------------------------------------------

def test_report_to_keywords_and_names(monkeypatch):
    monkeypatch.setattr(report_to, "installed", lambda name: name != "wandb")
    assert resolve_report_to("auto") == ["tensorboard"]  # the behaviour before report_to existed
    assert resolve_report_to("all") == ["tensorboard", "mlflow", "trackio"]
    assert resolve_report_to("none") == resolve_report_to([]) == []
    assert resolve_report_to("mlflow") == ["mlflow"]
    assert resolve_report_to(["trackio", "mlflow"]) == ["trackio", "mlflow"]
    monkeypatch.setattr(report_to, "installed", lambda name: False)
    assert resolve_report_to("auto") == resolve_report_to("all") == []


def test_a_tracker_without_its_package_fails_at_config_load_with_the_pip_command(monkeypatch):
    monkeypatch.setattr(report_to, "installed", lambda name: name != "mlflow")
    with pytest.raises(ConfigError) as err:
        load_config(None, ["report_to=[tensorboard, mlflow]"])
    message = str(err.value)
    assert "\n" not in message and "mlflow" in message
    assert "pip install 'teamrl[mlflow]'" in message and "pip install mlflow-skinny sqlalchemy alembic" in message
    assert load_config(None, ["report_to=[tensorboard]"]).report_to == ["tensorboard"]


@pytest.mark.parametrize("value, expected", [
    ("[wandb, neptune]", "unknown tracker 'neptune'; valid trackers: tensorboard, wandb, mlflow, trackio"),
    ("[mlflow, mlflow]", "names a tracker twice"),
    ("3", "expected a list of tracker names"),
    ("[[wandb]]", "expected a list of tracker names"),
])
def test_bad_report_to_is_refused_at_load(monkeypatch, value, expected):
    monkeypatch.setattr(report_to, "installed", lambda name: True)
    with pytest.raises(ConfigError, match="report_to"):
        load_config(None, [f"report_to={value}"])
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"report_to={value}"])
    assert expected in str(err.value)


def test_installed_means_every_needed_module_can_be_found(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m == "alembic" else real(m, *a))
    assert not report_to.installed("mlflow")  # mlflow-skinny alone has no sqlite store


# --- each backend, read back from its own files --------------------------------------------------

def test_tensorboard_scalars_and_a_resume_that_purges_the_stopped_runs_later_steps(tmp_path):
    need("tensorboard")
    record = drive("tensorboard", tmp_path, [0, 1, 2, 3])
    assert Path(record["dir"]) == tmp_path / "tensorboard"
    scalars = tensorboard_scalars(tmp_path / "tensorboard")
    assert {tag: dict(points) for tag, points in scalars.items()} == {
        "train/success": {0: 0.0, 1: 0.25, 2: 0.5, 3: 0.75}, "role/tool/reward": {0: -1.0, 1: -2.0, 2: -3.0, 3: -4.0}}
    drive("tensorboard", tmp_path, [2, 3, 4], offset=10.0, resume_from=2)  # checkpoint at step 1
    scalars = tensorboard_scalars(tmp_path / "tensorboard")
    assert scalars["train/success"] == [(0, 0.0), (1, 0.25), (2, 10.5), (3, 10.75), (4, 11.0)]


def test_wandb_offline_run_its_config_and_a_resume_under_the_same_id(tmp_path):
    need("wandb")
    first = drive("wandb", tmp_path, [0, 1, 2], failed=True)
    folder = Path(first["folder"])
    assert first["mode"] == "offline" and folder.parent == tmp_path / "wandb"
    assert wandb_history(folder) == wanted([0, 1, 2])
    run = wandb_run(folder)
    assert run["id"] == first["id"] and run["exit_code"] == 1
    assert run["config"]["train"] == {"steps": 4, "resume": ""} and run["config"]["seed"] == 3
    second = drive("wandb", tmp_path, [2, 3], offset=10.0, resume_from=2)
    assert second["id"] == first["id"] and Path(second["folder"]) != folder  # a second segment of the run
    assert wandb_history(Path(second["folder"])) == wanted([2, 3], offset=10.0)
    assert wandb_run(Path(second["folder"]))["exit_code"] == 0


def test_mlflow_sqlite_run_params_and_a_resume_that_continues_the_run(tmp_path):
    need("mlflow")
    from mlflow.tracking import MlflowClient

    first = drive("mlflow", tmp_path, [0, 1, 2], failed=True)
    assert first["tracking_uri"] == f"sqlite:///{(tmp_path / 'mlflow' / 'mlflow.db').resolve()}"
    client = MlflowClient(tracking_uri=first["tracking_uri"])
    run = client.get_run(first["run_id"])
    assert run.info.status == "FAILED" and run.info.run_name == tmp_path.name
    assert run.data.params == {"seed": "3", "train.steps": "4", "train.resume": "", "roles": "{}",
                               "task.name": "plan_path"}
    assert client.get_experiment(run.info.experiment_id).name == "teamrl-test"
    assert Path(run.info.artifact_uri.removeprefix("file://")).is_relative_to(tmp_path.resolve())

    def history(key):
        return sorted((m.step, m.value) for m in client.get_metric_history(first["run_id"], key))

    assert history("role/tool/reward") == [(0, -1.0), (1, -2.0), (2, -3.0)]
    assert history("eval/lost") == history("adv/none") == []
    second = drive("mlflow", tmp_path, [2, 3], offset=10.0, resume_from=2)
    assert second == first
    assert client.get_run(first["run_id"]).info.status == "FINISHED"
    # MLflow keeps every value: step 2 holds the stopped run's and the resumed run's.
    assert history("train/success") == [(0, 0.0), (1, 0.25), (2, 0.5), (2, 10.5), (3, 10.75)]


def test_trackio_local_run_its_config_and_a_resume_that_continues_the_run(tmp_path):
    need("trackio")
    first = drive("trackio", tmp_path, [0, 1, 2])
    database = Path(first["database"])
    assert first["name"] == tmp_path.name and database.name == "teamrl-test.db"
    rows = trackio_rows(database, first["name"])
    assert {run_id for run_id, _, _ in rows} == {first["id"]}
    assert {step: metrics for _, step, metrics in rows} == wanted([0, 1, 2])
    config = trackio_config(database, first["id"])
    assert config["train"] == {"steps": 4, "resume": ""} and config["seed"] == 3
    second = drive("trackio", tmp_path, [3], offset=10.0, resume_from=3)
    assert second["id"] == first["id"]
    assert [(step, metrics) for _, step, metrics in trackio_rows(database, first["name"])][-1] == \
        (3, wanted([3], offset=10.0)[3])


def test_a_tracker_that_fails_to_open_closes_the_ones_already_open(tmp_path, monkeypatch):
    need("tensorboard")
    closed = []
    real = registry.importlib.import_module

    class Broken:
        @staticmethod
        def open_run(run):
            raise RuntimeError("no tracker today")

    def fake_import(name):
        module = real(name)
        if name.endswith("tensorboard_backend"):
            opener = module.open_run

            def spy(run):
                tracker = opener(run)
                tracker.close = lambda failed: closed.append(failed)
                return tracker
            return type("Spy", (), {"open_run": staticmethod(spy)})
        return Broken if name.endswith("wandb_backend") else module

    monkeypatch.setattr(registry.importlib, "import_module", fake_import)
    with pytest.raises(RuntimeError, match="no tracker today"):
        open_trackers(["tensorboard", "wandb"], tmp_path, "p", CONFIG)
    assert closed == [True]


# --- a tiny training run, every installed tracker, stopped after a checkpoint and resumed ---------

OVERRIDES = ["regime=per_role", "task.name=plan_path", "task.size=4", "task.min_distance=2",
             "workflow.max_turns=2", "rollout.max_new_tokens=6", "train.batch_size=2", "train.eval_every=2",
             "train.eval_instances=2", "train.checkpoint_every=1", "algorithm.k=2", "run_name=tracked",
             "algorithm.drop_zero_signal=false", "algorithm.entropy_coef=0.05",
             "report_to=all", "project=teamrl-e2e"]


def last_values(rows: list[dict]) -> dict[int, dict[str, float]]:
    """metrics.jsonl as {step: {key: last finite value}} (a step's eval row and train row merged)."""
    out: dict[int, dict[str, float]] = {}
    for r in rows:
        out.setdefault(r["step"], {}).update({k: v for k, v in r.items() if k != "step" and v is not None})
    return out


def test_training_logs_to_every_installed_tracker_and_resume_continues_their_runs(tmp_path, random_model_dir):
    names = resolve_report_to("all")
    if not names:
        pytest.skip("no tracker is installed (pip install 'teamrl[test]')")
    from teamrl.training.loop import train

    base = [*OVERRIDES, f"policy.model={random_model_dir}", f"output_dir={tmp_path}"]
    run_dir = train(load_config(None, [*base, "train.steps=2"]), progress=False)
    first = json.loads((run_dir / "trackers.json").read_text())
    assert sorted(first) == sorted(names)
    train(load_config(None, [*base, "train.steps=3", "train.resume=auto"]), progress=False)  # from step2
    records = json.loads((run_dir / "trackers.json").read_text())
    jsonl = last_values([json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()])
    assert sorted(jsonl) == [0, 1, 2, 3]
    keys = ["train/success", "role/tool/reward", "policy/plan/loss", "eval/success"]
    expect = {step: {k: v for k, v in values.items() if k in keys} for step, values in jsonl.items()}
    assert all("train/success" in expect[s] and "policy/plan/loss" in expect[s] for s in (1, 2, 3))

    def check(got: dict[int, dict[str, float]], tracker: str) -> None:
        """Every value of metrics.jsonl is in the tracker. (It may hold more: the first run's final
        evaluation at step 2 came after the checkpoint, so the resumed metrics.jsonl dropped it.)"""
        assert sorted(got) == sorted(expect), tracker
        for step, values in expect.items():
            assert {k: got[step].get(k) for k in values} == pytest.approx(values), (tracker, step)

    if "tensorboard" in names:
        scalars = tensorboard_scalars(run_dir / "tensorboard")
        merged: dict[int, dict[str, float]] = {}
        for tag, points in scalars.items():
            for step, value in points:
                merged.setdefault(step, {})[tag] = value
        check(merged, "tensorboard")
    if "wandb" in names:
        assert records["wandb"]["id"] == first["wandb"]["id"]
        folders = sorted((run_dir / "wandb").glob("offline-run-*"))
        assert len(folders) == 2 and {wandb_run(f)["id"] for f in folders} == {first["wandb"]["id"]}
        history = wandb_history(folders[0]) | wandb_history(folders[1])  # steps 0-2, then step 3
        assert sorted(wandb_history(folders[1])) == [3]
        check(history, "wandb")
        assert wandb_run(folders[0])["config"]["train"]["batch_size"] == 2
    if "mlflow" in names:
        from mlflow.tracking import MlflowClient

        assert records["mlflow"] == first["mlflow"]
        client = MlflowClient(tracking_uri=records["mlflow"]["tracking_uri"])
        run = client.get_run(records["mlflow"]["run_id"])
        assert run.info.status == "FINISHED" and run.data.params["train.batch_size"] == "2"
        history = {}
        for key in keys:
            for m in sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: m.timestamp):
                history.setdefault(m.step, {})[key] = m.value
        check(history, "mlflow")
    if "trackio" in names:
        assert records["trackio"]["id"] == first["trackio"]["id"]
        merged = {}
        for run_id, step, metrics in trackio_rows(Path(records["trackio"]["database"]), "tracked"):
            assert run_id == first["trackio"]["id"]
            merged.setdefault(step, {}).update(metrics)
        check(merged, "trackio")


def test_a_failing_step_closes_the_trackers_as_failed(tmp_path, random_model_dir, monkeypatch):
    need("mlflow")
    from mlflow.tracking import MlflowClient

    from teamrl.training import loop as loop_module
    from teamrl.training import schedule as schedule_module

    real_step, calls = schedule_module.rollout_step, []

    def fail_second(*args, **kwargs):
        # The second step fails: a new run that fails before its first step is removed whole
        # (run_dir.RunDirectory.close), so the first one must be logged for the run to be kept.
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("step failed")
        return real_step(*args, **kwargs)

    monkeypatch.setattr(schedule_module, "rollout_step", fail_second)
    config = load_config(None, [*OVERRIDES, "report_to=[mlflow]", "train.steps=3", f"policy.model={random_model_dir}",
                                f"output_dir={tmp_path}"])
    with pytest.raises(RuntimeError, match="step failed"):
        loop_module.train(config, progress=False)
    record = json.loads((tmp_path / "tracked" / "trackers.json").read_text())["mlflow"]
    run = MlflowClient(tracking_uri=record["tracking_uri"]).get_run(record["run_id"])
    assert run.info.status == "FAILED"
    assert "eval/success" in run.data.metrics  # the step-0 evaluation was logged before the failure
