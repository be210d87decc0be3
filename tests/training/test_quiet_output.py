"""The terminal gets teamrl's own bars and lines; library bars are off and warnings go to RUN/train.log."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from teamrl.training.run_log import RunLog, quiet_third_party

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def quiet():
    """quiet_third_party() as the CLI calls it, undone afterwards (it changes transformers' global logging)."""
    from transformers.utils import logging as hf_logging

    quiet_third_party()
    yield hf_logging
    hf_logging.enable_progress_bar()
    hf_logging.enable_default_handler()
    hf_logging.disable_propagation()


def test_warnings_and_library_records_go_to_the_run_log_not_the_terminal(tmp_path, capsys, quiet):
    log = RunLog(tmp_path)
    try:
        warnings.warn("a library's FutureWarning", FutureWarning)
        logging.getLogger("transformers.modeling_utils").warning("a library's warning record")
    finally:
        log.close()
    text = (tmp_path / "train.log").read_text()
    assert "a library's FutureWarning" in text and "a library's warning record" in text
    assert "a library" not in capsys.readouterr().err
    assert log._handler not in logging.getLogger().handlers  # closed: later records stay out of this file


def test_http_client_request_records_stay_out_of_the_run_log(tmp_path):
    """An agent program's openai / httpx INFO lines ("HTTP Request: POST ...") are not written; their warnings are."""
    log = RunLog(tmp_path)
    try:
        logging.getLogger("httpx").info("HTTP Request: POST http://127.0.0.1/v1/chat/completions")
        logging.getLogger("openai._base_client").info("Retrying request")
        logging.getLogger("httpx").warning("an HTTP client's warning")
        logging.getLogger("teamrl").info("step 1/1: train success 0.500")
    finally:
        log.close()
    text = (tmp_path / "train.log").read_text()
    assert "HTTP Request" not in text and "Retrying request" not in text
    assert "an HTTP client's warning" in text and "step 1/1: train success 0.500" in text


def test_quiet_third_party_turns_off_the_transformers_bars(quiet):
    assert not quiet.is_progress_bar_enabled()


def test_warm_up_says_what_it_does_and_where_it_caches(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TEAMRL_CACHE", str(tmp_path))
    from teamrl.setup.tiny_default import WarmupRecipe, warm_up

    recipe = WarmupRecipe.for_task({"name": "plan_path", "size": 4, "min_distance": 2}, 1, steps=2,
                                   batch_size=4, hidden_size=16, num_layers=1)
    folder = warm_up(recipe)
    captured = capsys.readouterr()
    assert f"warming up the tiny default model for task 'plan_path' (2 supervised steps" in captured.out
    assert str(folder) in captured.out
    assert "warm-up: 100%" in captured.err  # the bar, with its count (and ETA while it runs)


def test_train_from_the_cli_prints_no_library_bars(tmp_path, random_model_dir):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "teamrl.cli", "train", "src/teamrl/configs/plan_path_team.yaml",
         f"policy.model={random_model_dir}", f"output_dir={tmp_path}", "run_name=quiet", "task.size=4",
         "task.min_distance=2", "train.steps=1", "train.batch_size=2", "train.eval_instances=2", "algorithm.k=2",
         "rollout.max_new_tokens=4"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for noise in ("Loading weights", "Writing model shards", "FutureWarning"):
        assert noise not in done.stdout + done.stderr, f"{noise!r} reached the terminal"
    assert "held-out success" in done.stdout
    assert "step 1/1: train success" in (tmp_path / "quiet" / "train.log").read_text()  # teamrl's own progress


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
