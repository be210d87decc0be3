"""Cells that survive sessions: a stopped study keeps its finished cells and skips them when run again,
refuses cells made with another config or code, and lists what remains with an ETA."""

import dataclasses
import json

import pytest

from teamrl.config import ConfigError
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.study import cells, rows
from teamrl.study.command import planned, run_command
from teamrl.study.rows import ROWS, study
from teamrl.study.runner import run_study
from teamrl.study.seed_run import SeedRun

TINY = ["train.steps=1", "train.batch_size=1", "algorithm.k=2", "rollout.max_new_tokens=4"]


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    """A random tiny Llama saved as a folder: a named-checkpoint stand-in that needs no warm-up."""
    folder = tmp_path_factory.mktemp("random-model")
    tok = build_char_tokenizer()
    build_tiny_model(tok, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


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


def test_a_cell_made_with_another_config_or_code_is_refused(tmp_path, random_model, monkeypatch):
    _run(tmp_path, random_model, ["single"], log=lambda line: None)
    changed = dataclasses.replace(study("real_split_calc"), overrides=(*study("real_split_calc").overrides,
                                                                        "rollout.top_k=5"))
    monkeypatch.setitem(rows.STUDIES, "real_split_calc", changed)  # the study's own settings changed since
    with pytest.raises(ConfigError, match=r"cell single seed 0 was made with another config .*--out OTHER_DIR"):
        _run(tmp_path, random_model, ["single"], log=lambda line: None)
    monkeypatch.undo()
    monkeypatch.setattr(cells, "code_digest", lambda: "0123456789abcdef")
    with pytest.raises(ConfigError, match="cell single seed 0 was made with another code"):
        _run(tmp_path, random_model, ["single"], log=lambda line: None)


def test_remaining_prices_cells_by_measured_then_planned_times():
    records = [{"row": "shared", "seed": 0, "seconds": 600.0}, {"row": "shared", "seed": 1, "seconds": 1200.0}]
    lines = cells.remaining([("shared", 2), ("alone", 2), ("team", 2)], records, {"alone": 1800.0})
    # shared: the mean of its two measured cells (900 s); alone: planned; team: the mean of every finished cell
    assert lines == ["3 cell(s) to run, 2 finished; ETA ~1h 00m",
                     "  shared seed 2: ~15m (measured, 2 cell(s))",
                     "  alone seed 2: ~30m (planned)",
                     "  team seed 2: ~15m (mean of finished cells)"]
    assert cells.remaining([("team", 0)], [], {})[0] == "1 cell(s) to run, 0 finished; ETA ~0s + 1 cell(s) not priced"


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
