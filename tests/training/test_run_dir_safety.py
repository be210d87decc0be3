"""A run directory holds a user's files and links next to teamrl's: resume touches only what teamrl wrote,
never through a symbolic link, refuses a linked checkpoints/ or step folder with one line (and works once
the user fixes it), and a read-only disk, a FIFO config or a truncated checkpoint each get one clear line."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from stop_after import stop_after_checkpoint
from toy import tiny_policy

from teamrl.cli import main as cli_main
from teamrl.config import config_to_dict, load_config
from teamrl.training import checkpoint as ckpt
from teamrl.training.loop import train
from teamrl.training.resume import LoopState, find_resume_point, save_training_state
from teamrl.training.run_dir import RunDirectory
from teamrl.training.run_files import RunFileError
from teamrl.training.update import make_optimizer

# The exact-resume runs of test_resume.py: a random tiny model, 5 short steps, a checkpoint each step.
OVERRIDES = [
    "regime=per_role", "task.name=plan_path", "task.size=4", "task.min_distance=2",
    "workflow.max_turns=2", "rollout.max_new_tokens=6", "train.steps=5", "train.batch_size=2",
    "train.eval_every=2", "train.eval_instances=2", "train.warmup_steps=2", "train.checkpoint_every=1",
    "train.keep_last=2", "algorithm.k=2", "algorithm.drop_zero_signal=false",
    "algorithm.entropy_coef=0.05", "policy.lr=1e-2"]
# Unit-level runs write their checkpoints by hand; a resume through the CLI that went on would train a
# step of the random tiny model (never a warm-up of the default one).
UNIT = ["regime=per_role", "train.keep_last=0", "train.steps=1", "train.eval_instances=1", "train.batch_size=1",
        "algorithm.k=2", "workflow.max_turns=1", "rollout.max_new_tokens=2", "diagnostics.level=none"]


@pytest.fixture
def config_file(tmp_path, random_model_dir) -> Path:
    config = load_config(None, [*OVERRIDES, f"policy.model={random_model_dir}", f"output_dir={tmp_path / 'runs'}"])
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(config)))
    return path


def _rows(run_dir: Path) -> list[dict]:
    """metrics.jsonl without the wall-clock values."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith("time/") and not k.endswith("/peak_memory_mb")}
            for row in rows]


def _final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    final = run_dir / "checkpoints" / "final"
    return {f"{f.parent.name}/{k}": v for f in sorted(final.glob("*/*.safetensors")) for k, v in load_file(str(f)).items()}


def _assert_same_run(got: Path, want: Path) -> None:
    assert _rows(got) == _rows(want)
    expected, actual = _final_weights(want), _final_weights(got)
    assert expected and set(actual) == set(expected)
    assert all(torch.equal(actual[key], expected[key]) for key in expected)


def _stopped_at(tmp_path: Path, config_file: Path, monkeypatch, step: int) -> Path:
    """A run of `config_file` that "died" right after writing its step-`step` checkpoint."""
    stop_after_checkpoint(monkeypatch, step, lambda: train(load_config(config_file, ["run_name=stopped"]), progress=False))
    return tmp_path / "runs" / "stopped"


def _one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("teamrl: error:")]
    assert len(lines) == 1 and "Traceback" not in err and "traceback in" not in err, err
    return lines[0]


# -- 1. resume cuts back only teamrl's own logs ---------------------------------------------------------

def test_resume_leaves_a_users_jsonl_files_and_links_alone(tmp_path, config_file, monkeypatch):
    """Files created after the checkpoint that teamrl did not write (a notes file, a link to a file outside
    the run directory) keep every byte; the resumed run still equals the uninterrupted one."""
    reference = train(load_config(config_file, ["run_name=reference"]), progress=False)
    stopped = _stopped_at(tmp_path, config_file, monkeypatch, 3)
    notes = stopped / "notes.jsonl"
    notes.write_text('{"note": "lr looks high"}\n')
    outside = tmp_path / "elsewhere" / "mine.jsonl"
    outside.parent.mkdir()
    outside.write_bytes(b"x" * 1999 + b"\n")
    (stopped / "linked.jsonl").symlink_to(outside)

    assert cli_main(["train", str(config_file), "run_name=stopped", "--resume", str(stopped)]) == 0
    assert notes.read_text() == '{"note": "lr looks high"}\n'
    assert outside.stat().st_size == 2000 and (stopped / "linked.jsonl").is_symlink()
    _assert_same_run(stopped, reference)


def test_a_linked_metrics_log_is_refused_and_its_target_kept(tmp_path, config_file, monkeypatch, capsys):
    stopped = _stopped_at(tmp_path, config_file, monkeypatch, 3)
    outside = tmp_path / "elsewhere.jsonl"
    shutil.move(stopped / "metrics.jsonl", outside)
    (stopped / "metrics.jsonl").symlink_to(outside)
    size = outside.stat().st_size
    with open(outside, "a") as handle:  # lines after the checkpoint: a resume would cut them
        handle.write('{"step": 99}\n')
    assert cli_main(["train", str(config_file), "run_name=stopped", "--resume", str(stopped)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"{stopped / 'metrics.jsonl'} is a symbolic link" in line and "replace it by a regular file" in line
    assert outside.stat().st_size == size + len('{"step": 99}\n')


# -- 2. a linked checkpoints/ folder ----------------------------------------------------------------------

def _unit_setup(tmp_path: Path, model: Path, run_name: str = "run"):
    config = load_config(None, [*UNIT, f"output_dir={tmp_path}", f"run_name={run_name}", f"policy.model={model}"])
    policies = {"tool": tiny_policy(seed=0, name="tool"), "plan": tiny_policy(seed=1, name="plan")}
    optimizers = {n: make_optimizer(p, config.policy, config.train, 0.0) for n, p in policies.items()}
    return config, policies, optimizers


def _save_step(config, policies, optimizers, step, resume=None) -> RunDirectory:
    run = RunDirectory(config, resume)
    run.log(step, {"x": float(step)})
    save_training_state(run, LoopState(step), policies, optimizers, torch.Generator().manual_seed(7),
                        random.Random(7), config.train.keep_last)
    run.close()
    return run


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root` (links by their target), to compare before and after."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = ("link:" + os.readlink(path)) if path.is_symlink() else (path.read_bytes() if path.is_file() else "dir")
    return out


def test_a_linked_checkpoints_folder_is_refused_untouched_and_resumes_once_fixed(tmp_path, random_model_dir, capsys):
    config, policies, optimizers = _unit_setup(tmp_path, random_model_dir)
    run = _save_step(config, policies, optimizers, 1)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(run.checkpoints, elsewhere)
    run.checkpoints.symlink_to(elsewhere)
    (elsewhere / "step00002.partial").mkdir()  # what recover() would delete ...
    (elsewhere / "step00002.partial" / "weights.bin").write_bytes(b"keep")
    (elsewhere / "step00003.old").write_text("keep")  # ... and rename
    before = _tree(elsewhere)

    assert cli_main(["train", str(run.path / "config.yaml"), "--resume", str(run.path)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"{run.checkpoints} is a symbolic link (to {elsewhere})" in line and "remove the link" in line
    assert _tree(elsewhere) == before

    run.checkpoints.unlink()  # the fix the message names: the folder itself in place of the link
    shutil.move(elsewhere, run.checkpoints)
    (run.checkpoints / "step00003.old").unlink()
    config.train.resume = str(run.path)
    point = find_resume_point(config)
    assert point.checkpoint == run.checkpoints / "step00001"
    _save_step(config, policies, optimizers, 2, resume=point)
    assert [s for s, _ in ckpt.step_checkpoints(run.checkpoints)] == [1, 2]


# -- 3. a linked step checkpoint ----------------------------------------------------------------------------

def test_a_linked_step_checkpoint_stops_rotation_cleanly_and_the_run_resumes_once_fixed(tmp_path, random_model_dir):
    config, policies, optimizers = _unit_setup(tmp_path, random_model_dir)
    config.train.keep_last = 2
    run = _save_step(config, policies, optimizers, 1)
    config.train.resume = "auto"
    run = _save_step(config, policies, optimizers, 2, resume=find_resume_point(config))
    kept = tmp_path / "kept-step1"
    shutil.move(run.checkpoints / "step00001", kept)
    (run.checkpoints / "step00001").symlink_to(kept)
    before = _tree(kept)

    # Rotation (keep_last 1 here) would delete step00001: it refuses instead, with the link still in place.
    with pytest.raises(RunFileError, match="step00001 is a symbolic link"):
        ckpt.rotate(run.checkpoints, 1)
    assert _tree(kept) == before and sorted(p.name for p in run.checkpoints.iterdir()) == ["step00001", "step00002"]
    # A resume refuses it before changing anything, and so does every later one until it is fixed.
    for _ in range(2):
        with pytest.raises(RunFileError, match="step00001 is a symbolic link"):
            _save_step(config, policies, optimizers, 3, resume=find_resume_point(config))
        assert _tree(kept) == before and (run.checkpoints / "step00001").is_symlink()

    (run.checkpoints / "step00001").unlink()  # the fix: the folder itself in place of the link
    shutil.move(kept, run.checkpoints / "step00001")
    _save_step(config, policies, optimizers, 3, resume=find_resume_point(config))
    assert [s for s, _ in ckpt.step_checkpoints(run.checkpoints)] == [2, 3]


# -- 4. read-only disks, FIFO configs, truncated checkpoints -------------------------------------------------

def _can_mount_read_only(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        done = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro {probe} {probe} && touch {probe}/x"],
                              capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode != 0 and "Read-only file system" in done.stderr


def _teamrl_on_read_only(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    """`teamrl ARGV` in a private mount namespace where `folder` is a read-only bind mount of itself."""
    command = " ".join(["mount --bind -o ro", str(folder), str(folder), "&& exec", sys.executable, "-m", "teamrl.cli",
                        *(f"'{a}'" for a in argv)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(folder.parent)}
    return subprocess.run(["unshare", "-m", "sh", "-c", command], capture_output=True, text=True, timeout=300, env=env, check=False)


def test_a_read_only_disk_is_one_line_for_new_runs_resume_and_report(tmp_path, random_model_dir):
    """A real read-only bind mount (needs `unshare -m` and mount rights: skipped where they are missing)."""
    if not _can_mount_read_only(tmp_path):
        pytest.skip("cannot make a read-only bind mount here (unshare -m / mount not permitted)")
    config, policies, optimizers = _unit_setup(tmp_path / "ro", random_model_dir)
    run = _save_step(config, policies, optimizers, 1)
    config_file = tmp_path / "run.yaml"
    shutil.copy(run.path / "config.yaml", config_file)
    before = _tree(tmp_path / "ro")
    cases = {"new run": ["train", str(config_file), f"output_dir={tmp_path / 'ro' / 'new'}", "run_name=x"],
             "resume": ["train", str(config_file), "--resume", str(run.path)],
             "report": ["report", str(run.path)]}
    for case, argv in cases.items():
        done = _teamrl_on_read_only(tmp_path / "ro", *argv)
        assert done.returncode == 2, (case, done.stderr[-2000:])
        line = _one_error_line(done.stderr)
        assert "is on a read-only file system" in line and "writable disk" in line, (case, line)
        assert str(tmp_path / "ro") in line, (case, line)
    assert _tree(tmp_path / "ro") == before
    # A report of the read-only run written elsewhere works.
    done = _teamrl_on_read_only(tmp_path / "ro", "report", str(run.path), "--out", str(tmp_path / "report"))
    assert done.returncode == 0 and (tmp_path / "report" / "index.html").is_file(), done.stderr[-2000:]
    assert not list(tmp_path.glob("teamrl-error-*")) and "x" not in os.listdir(tmp_path / "ro")


def test_a_fifo_as_config_file_is_named_as_such(tmp_path, capsys):
    fifo = tmp_path / "run.yaml"
    os.mkfifo(fifo)
    assert cli_main(["train", str(fifo)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "is not a regular file (a FIFO" in line and "does not exist" not in line and "pass a YAML file" in line


def test_a_fifo_as_the_run_config_is_refused_on_resume(tmp_path, random_model_dir):
    """Reading a FIFO blocks until somebody writes to it: resume must refuse it without opening it."""
    config, policies, optimizers = _unit_setup(tmp_path, random_model_dir)
    run = _save_step(config, policies, optimizers, 1)
    config_file = tmp_path / "run.yaml"
    shutil.move(run.path / "config.yaml", config_file)
    os.mkfifo(run.path / "config.yaml")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        done = subprocess.run([sys.executable, "-m", "teamrl.cli", "train", str(config_file), "--resume", str(run.path)],
                              capture_output=True, text=True, timeout=120, env=env, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("resume blocked reading the FIFO config.yaml of the run directory")
    assert done.returncode == 2, done.stderr[-2000:]
    line = _one_error_line(done.stderr)
    assert f"{run.path / 'config.yaml'} is a FIFO (named pipe)" in line


def _truncate(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


def test_a_truncated_checkpoint_is_named_and_the_previous_one_resumed(tmp_path, config_file, monkeypatch, capsys):
    """End to end: the newest checkpoint's weights lose their second half; resume says so, takes the one
    before it, and still ends exactly like the uninterrupted run."""
    reference = train(load_config(config_file, ["run_name=reference"]), progress=False)
    stopped = _stopped_at(tmp_path, config_file, monkeypatch, 3)
    weights = next((stopped / "checkpoints" / "step00003").glob("*/model.safetensors"))
    _truncate(weights)
    capsys.readouterr()
    assert cli_main(["train", str(config_file), "run_name=stopped", "--resume", str(stopped)]) == 0
    err = capsys.readouterr().err
    rel = weights.relative_to(weights.parent.parent)
    assert f"teamrl: skipping checkpoint {stopped / 'checkpoints' / 'step00003'}: {rel} is truncated" in err, err
    _assert_same_run(stopped, reference)


def test_resume_refuses_when_every_checkpoint_is_truncated(tmp_path, random_model_dir, capsys):
    config, policies, optimizers = _unit_setup(tmp_path, random_model_dir)
    run = _save_step(config, policies, optimizers, 1)
    config.train.resume = "auto"
    run = _save_step(config, policies, optimizers, 2, resume=find_resume_point(config))
    for step in ("step00001", "step00002"):
        _truncate(run.checkpoints / step / ckpt.TRAINER_STATE)
    before = _tree(run.path)
    assert cli_main(["train", str(run.path / "config.yaml"), "--resume", str(run.path)]) == 2
    err = capsys.readouterr().err
    assert "skipping checkpoint" in err and f"{ckpt.TRAINER_STATE} is truncated" in err
    line = _one_error_line(err)
    assert "no usable step checkpoint" in line and "step00001, step00002" in line and "delete them" in line
    assert {k: v for k, v in _tree(run.path).items() if k != ".lock"} == before  # (.lock: the resume's own)
