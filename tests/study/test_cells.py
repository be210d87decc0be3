"""Cells that survive sessions: a stopped study keeps its finished cells and skips them when run again,
refuses cells made with another config, checks cells made at another code by re-running one, and lists
what remains with an ETA."""

import dataclasses
import json

import pytest

from teamrl.config import ConfigError
from teamrl.study import cells, rows
from teamrl.study.command import planned, run_command
from teamrl.study.rows import ROWS, study
from teamrl.study.runner import run_study
from teamrl.study.seed_run import SeedRun

TINY = ["train.steps=1", "train.batch_size=1", "algorithm.k=2", "rollout.max_new_tokens=4"]


def _run(out, model, keys, log):
    chosen, protocol, overrides = planned(study("real_split_calc").with_model(str(model)), quick=True)
    protocol = dataclasses.replace(protocol, validation_instances=2, test_instances=2)
    return run_study(chosen, protocol, [ROWS[k] for k in keys], out, [*overrides, *TINY], log=log)


def test_a_stopped_study_keeps_its_finished_cell_and_skips_it(tmp_path, random_model, monkeypatch):
    original, calls = SeedRun.run, []

    def fail_on_second(self, row):
        calls.append(row.key)
        if len(calls) == 2:
            raise KeyboardInterrupt("stopped during the second cell")
        return original(self, row)

    monkeypatch.setattr(SeedRun, "run", fail_on_second)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, random_model, ["team", "single"], log=lambda line: None)
    first = json.loads((tmp_path / "results.json").read_text())["results"]
    assert [r["row"] for r in first] == ["team"] and set(first[0]["digest"]) == {"config", "code"}

    monkeypatch.setattr(SeedRun, "run", original)
    lines = []
    _run(tmp_path, random_model, ["team", "single"], log=lines.append)
    assert lines[0].startswith("1 cell(s) to run, 1 finished; ETA ~")
    assert lines[1].startswith("  single seed 0: ~")
    second = json.loads((tmp_path / "results.json").read_text())["results"]
    assert second[0] == first[0]  # the finished cell was not run again
    assert [r["row"] for r in second] == ["team", "single"]


def test_a_cell_made_with_another_config_is_refused(tmp_path, random_model, monkeypatch):
    _run(tmp_path, random_model, ["single"], log=lambda line: None)
    changed = dataclasses.replace(study("real_split_calc"), overrides=(*study("real_split_calc").overrides,
                                                                        "rollout.top_k=5"))
    monkeypatch.setitem(rows.STUDIES, "real_split_calc", changed)  # the study's own settings changed since
    with pytest.raises(ConfigError, match=r"cell single seed 0 was made with another config "
                                          r"\(config.rollout.top_k: 0 -> 5\).*--out OTHER_DIR"):
        _run(tmp_path, random_model, ["single"], log=lambda line: None)


def test_a_field_a_later_code_added_is_checked_by_a_re_run_not_refused(tmp_path, random_model):
    _run(tmp_path, random_model, ["single_grpo"], log=lambda line: None)
    target = tmp_path / "results.json"
    made = json.loads(target.read_text())
    record = made["results"][0]
    del record["settings"]["config.rollout.top_k"]  # as if the cell predated the field
    record["digest"]["config"] = "0000000000000000"
    target.write_text(json.dumps(made))
    lines = []
    _run(tmp_path, random_model, ["single_grpo"], log=lines.append)
    (check,) = json.loads(target.read_text())["code_checks"]
    assert check["accepted"] and check["cell"] == ["single_grpo", 0]
    assert "code check: single_grpo seed 0: re-run bit-identical" in lines
    # A cell that records no settings cannot be compared field by field: refused.
    del made["results"][0]["settings"]
    target.write_text(json.dumps(made))
    with pytest.raises(ConfigError, match="records no settings to compare field by field"):
        _run(tmp_path, random_model, ["single_grpo"], log=lambda line: None)


def test_cells_made_at_another_code_are_accepted_when_one_re_runs_equal(tmp_path, random_model, monkeypatch):
    _run(tmp_path, random_model, ["single", "single_grpo"], log=lambda line: None)
    made = json.loads((tmp_path / "results.json").read_text())
    monkeypatch.setattr(cells, "code_digest", lambda: "0123456789abcdef")  # a later commit
    ran, original = [], SeedRun.run

    def counting(self, row):
        ran.append((row.key, self.seed, self.out.name))
        return original(self, row)

    monkeypatch.setattr(SeedRun, "run", counting)
    lines = []
    _run(tmp_path, random_model, ["single", "single_grpo"], log=lines.append)
    old = made["results"][0]["digest"]["code"]
    # The cheapest cell that trains is re-run, in a folder of its own; the eval cell is not.
    assert ran == [("single_grpo", 0, f"{old}-0123456789abcdef")]
    assert f"2 finished cell(s) were made at code {old}, now 0123456789abcdef: re-running single_grpo seed 0" in (
        "\n".join(lines)
    )
    after = json.loads((tmp_path / "results.json").read_text())
    assert after["results"] == made["results"]  # accepted as they were
    (check,) = after["code_checks"]
    assert check["accepted"] and check["how"] == "re-run bit-identical" and check["differing"] == []
    assert set(after["results"][1]["fingerprints"]) == {"single_grpo-s0"}  # the cell's one training run
    assert (check["code"], check["now"], check["cell"]) == (old, "0123456789abcdef", ["single_grpo", 0])
    ran.clear()
    _run(tmp_path, random_model, ["single", "single_grpo"], log=lambda line: None)
    assert ran == []  # the recorded check covers this code: nothing re-run


def test_cells_made_at_another_code_are_refused_when_the_re_run_differs(tmp_path, random_model, monkeypatch):
    _run(tmp_path, random_model, ["single_grpo"], log=lambda line: None)
    target = tmp_path / "results.json"
    made = json.loads(target.read_text())
    recorded = made["results"][0]["test_success"]
    made["results"][0]["test_success"] = recorded + 0.25  # as if another code had produced another result
    target.write_text(json.dumps(made))
    monkeypatch.setattr(cells, "code_digest", lambda: "0123456789abcdef")
    with pytest.raises(ConfigError) as refused:
        _run(tmp_path, random_model, ["single_grpo"], log=lambda line: None)
    message = str(refused.value)
    assert "re-running single_grpo seed 0 at code 0123456789abcdef gave another result" in message
    assert f"test_success: recorded {recorded + 0.25}, now {recorded}" in message
    assert "--out OTHER_DIR" in message and "--accept-code" in message
    (check,) = json.loads(target.read_text())["code_checks"]
    assert not check["accepted"] and check["differing"] == ["test_success"]
    # --accept-code keeps them knowingly, and says so in the file.
    chosen, protocol, overrides = planned(study("real_split_calc").with_model(random_model), quick=True)
    protocol = dataclasses.replace(protocol, validation_instances=2, test_instances=2)
    run_study(chosen, protocol, [ROWS["single_grpo"]], tmp_path, [*overrides, *TINY], log=lambda line: None,
              accept_code=True)
    checks = json.loads(target.read_text())["code_checks"]
    assert [c["how"] for c in checks] == ["re-run differs", "--accept-code, not re-run"]


def test_equal_results_from_another_run_are_refused_and_old_cells_are_checked_on_results(tmp_path, random_model,
                                                                                          monkeypatch):
    _run(tmp_path, random_model, ["single_grpo"], log=lambda line: None)
    target = tmp_path / "results.json"
    made = json.loads(target.read_text())
    fingerprint = made["results"][0]["fingerprints"]["single_grpo-s0"]
    fingerprint["rollouts"]["1"] = "0" * 16  # as if another code had sampled another token at step 1
    target.write_text(json.dumps(made))
    monkeypatch.setattr(cells, "code_digest", lambda: "0123456789abcdef")
    with pytest.raises(ConfigError) as refused:
        _run(tmp_path, random_model, ["single_grpo"], log=lambda line: None)
    message = str(refused.value)
    assert ("re-running single_grpo seed 0 at code 0123456789abcdef gave the recorded results from another run "
            "(run single_grpo-s0: step 1's sampled tokens or their log-probs differ). Other cells of the folder may not be equal") in message
    assert "--out OTHER_DIR" in message and "--accept-code" in message
    (check,) = json.loads(target.read_text())["code_checks"]
    assert not check["accepted"] and check["how"] == "equal results, not the same run" and check["differing"] == []
    # A cell made before fingerprints existed is checked on its results only, and the check says so.
    del made["results"][0]["fingerprints"]
    made.pop("code_checks", None)
    target.write_text(json.dumps(made))
    lines = []
    _run(tmp_path, random_model, ["single_grpo"], log=lines.append)
    checks = json.loads(target.read_text())["code_checks"]
    assert checks[-1]["accepted"]
    assert checks[-1]["how"] == "re-run equal (results only: the recorded cell has no fingerprints)"


def test_differing_fields_leave_out_times_and_paths():
    recorded = {"test_success": 0.5, "seconds": 9.0, "run_dir": "/a/x", "cells": {"v": {"base": "/a/m", "t": [1, 2]}}}
    rerun = {"test_success": 0.5, "seconds": 3.0, "run_dir": "/b/x", "cells": {"v": {"base": "/b/m", "t": [1, 3]}}}
    assert cells.differing_fields(recorded, rerun) == ["cells.v.t.1"]
    assert cells.differing_fields({"a": 1}, {"a": 1, "b": 2}) == ["b"]
    assert cells.differing_fields({"a": [1]}, {"a": [1, 2]}) == ["a"]


def test_the_recheck_cell_is_the_cheapest_that_trains():
    records = [{"row": "single", "seed": 0, "seconds": 5.0}, {"row": "shared", "seed": 1, "seconds": 90.0},
               {"row": "shared", "seed": 0, "seconds": 90.0}, {"row": "alone", "seed": 0, "seconds": 200.0}]
    keys = [(r["row"], r["seed"]) for r in records]
    assert cells.recheck_cell(keys, records) == ("shared", 0)  # ties: the lower seed
    assert cells.recheck_cell([("single", 0)], records) == ("single", 0)  # no training cell: the cheapest


def test_each_command_is_recorded_with_its_commit_cpu_and_wall_time(tmp_path, random_model):
    _run(tmp_path, random_model, ["single"], log=lambda line: None)
    (entry,) = json.loads((tmp_path / "results.json").read_text())["commands"]
    assert entry["seeds"] == [0] and entry["rows"] == ["single"] and entry["cells_run"] == 1
    assert entry["wall_s"] > 0 and entry["code"] == cells.code_digest() and entry["cpu"]["model_name"]
    assert set(entry) >= {"command", "commit", "dirty", "started", "pid"}


def test_remaining_prices_cells_by_measured_then_planned_times():
    records = [{"row": "shared", "seed": 0, "seconds": 600.0}, {"row": "shared", "seed": 1, "seconds": 1200.0}]
    lines = cells.remaining([("shared", 2), ("alone", 2), ("team", 2)], records, {"alone": 1800.0})
    # shared: the mean of its two measured cells (900 s); alone: planned; team: the mean of every finished cell
    assert lines == ["3 cell(s) to run, 2 finished; ETA ~1h 00m",
                     "  shared seed 2: ~15m (measured, 2 cell(s))",
                     "  alone seed 2: ~30m (planned)",
                     "  team seed 2: ~15m (mean of finished cells)"]
    assert cells.remaining([("team", 0)], [], {})[0] == "1 cell(s) to run, 0 finished; ETA ~0s + 1 cell(s) not priced"


def test_remaining_scales_planned_prices_by_the_folders_measured_cells():
    # The finished team cells took 3x their planned price, so the unmeasured shared row is priced 3x too.
    records = [{"row": "team", "seed": 0, "seconds": 900.0}, {"row": "team", "seed": 1, "seconds": 900.0}]
    lines = cells.remaining([("shared", 0), ("team", 2)], records, {"team": 300.0, "shared": 600.0})
    assert lines == ["2 cell(s) to run, 2 finished; ETA ~45m",
                     "  shared seed 0: ~30m (planned x 3.0, this folder's measured / planned)",
                     "  team seed 2: ~15m (measured, 2 cell(s))"]
    assert cells.planned_scale({"sft": [50.0]}, {"team": 300.0}) is None  # no finished cell of a planned row


def test_records_without_a_digest_are_kept_unchecked(tmp_path):
    said = []
    cells.check_cells(tmp_path / "results.json", [{"row": "team", "seed": 0}], {}, said.append)
    assert said == ["1 finished cell(s) have no digest (written before digests); kept unchecked: team seed 0"]


def test_the_remaining_command_lists_without_running(tmp_path, random_model, capsys):
    out = tmp_path / "plan"
    run_command("real_split_calc", False, None, ["team", "shared"], str(out), [], remaining_only=True)
    shown = capsys.readouterr().out
    assert "6 cell(s) to run, 0 finished; ETA ~" in shown and "  shared seed 2: ~5m (planned)" in shown
    assert not (out / "results.json").exists()


def test_the_code_digest_follows_the_deciding_sources_only(tmp_path, monkeypatch):
    package = tmp_path / "deciding_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "loss.py").write_text("SCALE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cells, "CODE_PACKAGES", ("deciding_pkg", "teamrl.study"))
    cells.code_digest.cache_clear()
    try:
        before = cells.code_digest()
        (package / "loss.py").write_text("SCALE = 2\n")
        cells.code_digest.cache_clear()
        changed = cells.code_digest()
        assert changed != before
        monkeypatch.setattr(cells, "REPORT_ONLY", cells.REPORT_ONLY | {"runner.py"})  # as if the runner only reported
        cells.code_digest.cache_clear()
        assert cells.code_digest() != changed
    finally:
        cells.code_digest.cache_clear()  # the other tests digest the real packages


def test_the_per_role_gradient_tracking_is_digested_and_the_alerts_are_not(monkeypatch):
    assert "teamrl.diagnostics" in cells.CODE_PACKAGES and "gradients.py" not in cells.MEASURE_ONLY
    assert "alerts.py" in cells.MEASURE_ONLY
    cells.code_digest.cache_clear()
    try:
        before = cells.code_digest()
        monkeypatch.setattr(cells, "MEASURE_ONLY", cells.MEASURE_ONLY | {"gradients.py"})
        cells.code_digest.cache_clear()
        assert cells.code_digest() != before  # gradients.py was part of the digest
    finally:
        cells.code_digest.cache_clear()  # the other tests digest the real packages
