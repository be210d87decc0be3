"""Replaying a run's metrics through the alert rules: the loop's order of observations, other windows."""

from __future__ import annotations

import json

import pytest
import yaml

from teamrl.cli import main as cli_main
from teamrl.config import config_to_dict, load_config
from teamrl.report.alert_replay import observations, replay_alerts

ROWS = [
    {"step": 0, "eval/success": 0.5},
    {"step": 1, "train/success": 0.4, "x": 1.0},
    {"step": 2, "eval/success": 0.6},  # in-loop evaluation: logged before its step's training row
    {"step": 2, "train/success": 0.5, "x": 2.0},
    {"step": 3, "train/success": 0.1, "x": 3.0},
    {"step": 3, "eval/success": 0.2},  # the final evaluation, after the last training row
]


def test_observations_follow_the_loop_order():
    assert observations(ROWS) == [
        (0, {"eval/success": 0.5}),
        (1, {"train/success": 0.4, "x": 1.0}),
        (2, {"train/success": 0.5, "x": 2.0, "eval/success": 0.6}),
        (3, {"train/success": 0.1, "x": 3.0}),
        (3, {"eval/success": 0.2}),
    ]


def _run_dir(tmp_path, rows):
    config = load_config(None, ["diagnostics.level=cheap", "diagnostics.baseline_steps=1"])
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config_to_dict(config)))
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_replay_raises_the_alerts_of_the_logged_metrics_under_overrides(tmp_path):
    run = _run_dir(tmp_path, ROWS)
    fired = replay_alerts(run)
    assert [(a.kind, a.step) for a in fired] == [("collapse", 3)]  # 0.2 is 0.4 below the 0.6 peak of step 2
    assert "peak of 60.0% at step 2" in fired[0].message
    assert replay_alerts(run, ["diagnostics.collapse_drop=0.5"]) == []


def test_replay_errors_say_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="has no config.yaml"):
        replay_alerts(tmp_path)
    run = _run_dir(tmp_path, ROWS)
    (run / "metrics.jsonl").write_text('{"step": 0, "eval/success": 0.5}\n{"step": 1,\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl, line 2: not valid JSON"):
        replay_alerts(run)
    with pytest.raises(ValueError, match="diagnostics.level: none"):
        replay_alerts(run, ["diagnostics.level=none"])


def test_alerts_command_prints_the_replayed_alerts(tmp_path, capsys):
    run = _run_dir(tmp_path, ROWS)
    assert cli_main(["alerts", str(run)]) == 0
    assert "step    3  collapse" in capsys.readouterr().out
    assert cli_main(["alerts", str(run), "diagnostics.collapse_drop=0.5"]) == 0
    assert capsys.readouterr().out.strip() == "no alert"
    assert cli_main(["alerts", str(tmp_path / "missing")]) == 2
    assert "has no config.yaml" in capsys.readouterr().err
