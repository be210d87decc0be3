"""Exact resume, end to end: a run killed with SIGKILL and resumed with --resume equals the run that was
never interrupted (metrics, final weights, summary); also for per-role LoRA. Unit level: test_checkpoint.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file
from stop_after import Stop, stop_after_checkpoint

from teamrl.cli import main as cli_main
from teamrl.config import config_to_dict, load_config
from teamrl.training import checkpoint as ckpt
from teamrl.training import loop as loop_module
from teamrl.training import schedule as schedule_module
from teamrl.training.loop import train

# A random tiny model keeps this fast (no warm-up). Its samples are near-uniform, so most groups
# have equal rewards: keep them (drop_zero_signal=false) and add an entropy term so every step
# moves the weights and the AdamW moments; kl_coef exercises the frozen reference on resume.
OVERRIDES = [
    "regime=per_role", "task.name=plan_path", "task.size=4", "task.min_distance=2",
    "workflow.max_turns=2", "rollout.max_new_tokens=6", "train.steps=5", "train.batch_size=2",
    "train.eval_every=2", "train.eval_instances=2", "train.warmup_steps=2", "train.checkpoint_every=1",
    "train.keep_last=2", "algorithm.k=2", "algorithm.drop_zero_signal=false",
    "algorithm.entropy_coef=0.05", "algorithm.kl_coef=0.01", "policy.lr=1e-2"]


def _config_file(tmp_path: Path, random_model_dir: Path) -> Path:
    config = load_config(None, [*OVERRIDES, f"policy.model={random_model_dir}", f"output_dir={tmp_path / 'runs'}"])
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(config)))
    return path


def _rows(run_dir: Path) -> list[dict]:
    """metrics.jsonl without the wall-clock values and the measured peak memory."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith("time/") and not k.endswith("/peak_memory_mb")}
            for row in rows]


def _final_weights(run_dir: Path) -> dict[str, dict[str, torch.Tensor]]:
    """Every policy's saved tensors (model.safetensors, or adapter_model.safetensors for LoRA)."""
    final = run_dir / "checkpoints" / "final"
    return {p.name: {k: v for f in sorted(p.glob("*.safetensors")) for k, v in load_file(str(f)).items()}
            for p in sorted(final.iterdir()) if p.is_dir()}


def _assert_same_run(got: Path, want: Path) -> None:
    assert _rows(got) == _rows(want)
    expected, actual = _final_weights(want), _final_weights(got)
    assert set(actual) == set(expected) == {"plan", "tool"}
    for name in expected:
        assert expected[name] and set(actual[name]) == set(expected[name])
        assert all(torch.equal(actual[name][key], expected[name][key]) for key in expected[name]), name
    summary = {k: v for k, v in json.loads((got / "summary.json").read_text()).items() if k != "train_seconds"}
    assert summary["fingerprint"]["complete"]  # the resumed run's fingerprint covers the steps before the stop
    assert summary == {k: v for k, v in json.loads((want / "summary.json").read_text()).items()
                       if k != "train_seconds"}


def _kill_at(proc: subprocess.Popen, marker: Path, outcome: dict) -> None:
    """SIGKILL `proc` as soon as `marker` exists; records whether it was still running then."""
    deadline = time.time() + 600
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    outcome["running"] = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    outcome["code"] = proc.wait()


@pytest.fixture
def one_thread():
    """One intra-op thread here and in the child: identical arithmetic, and on a busy 2-core machine
    the tiny model runs ~10x faster than with two threads contending."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    torch.set_num_threads(before)


def test_killed_and_resumed_run_equals_uninterrupted(tmp_path, random_model_dir, one_thread):
    config_file = _config_file(tmp_path, random_model_dir)
    killed = tmp_path / "runs" / "killed"
    log = open(tmp_path / "killed.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "teamrl.cli", "train", str(config_file), "run_name=killed"],
                            env=one_thread, stdout=log, stderr=subprocess.STDOUT)
    outcome: dict = {}
    killer = threading.Thread(target=_kill_at, args=(proc, killed / "checkpoints" / "step00002" / ckpt.MARKER,
                                                     outcome))
    killer.start()
    try:  # the uninterrupted reference runs meanwhile, in this process
        reference = train(load_config(config_file, ["run_name=reference"]), progress=False)
    finally:
        killer.join()
        log.close()
    assert outcome["running"], f"the run ended before it was killed: {(tmp_path / 'killed.log').read_text()[-2000:]}"
    assert outcome["code"] == -signal.SIGKILL
    assert not (killed / "summary.json").exists()

    assert cli_main(["train", str(config_file), "run_name=killed", "--resume", str(killed)]) == 0

    _assert_same_run(killed, reference)
    steps = [s for s, _ in ckpt.step_checkpoints(killed / "checkpoints")]
    assert steps == [4, 5]  # keep_last: 2
    assert sorted(p.name for p in (killed / "checkpoints").iterdir()) == ["best", "final", "step00004", "step00005"]


def _stopped_and_resumed(tmp_path, config_file, monkeypatch, overrides, stop_at=3) -> Path:
    """Run `stopped` until its step-`stop_at` checkpoint is written (then it "dies"), resume it; its folder."""
    stop_after_checkpoint(monkeypatch, stop_at,
                          lambda: train(load_config(config_file, ["run_name=stopped", *overrides]), progress=False))
    stopped = tmp_path / "runs" / "stopped"
    train(load_config(config_file, ["run_name=stopped", "train.resume=auto", *overrides]), progress=False)
    return stopped


def test_lora_run_stopped_after_a_checkpoint_resumes_exactly(tmp_path, random_model_dir, one_thread, monkeypatch):
    """Per-role LoRA (two adapters, two optimizers on one shared base), stopped in-process."""
    config_file = _config_file(tmp_path, random_model_dir)
    lora = ["policy.lora={r: 4, alpha: 8}"]
    reference = train(load_config(config_file, ["run_name=reference", *lora]), progress=False)
    stopped = _stopped_and_resumed(tmp_path, config_file, monkeypatch, lora)
    assert all((p / "adapter_config.json").exists() for p in (stopped / "checkpoints" / "step00005").iterdir()
               if p.is_dir())
    _assert_same_run(stopped, reference)


def test_resume_keeps_the_role_gradient_ema_of_full_diagnostics_and_damping(tmp_path, random_model_dir, one_thread,
                                                                            monkeypatch):
    """The coherence metric and the damping read an EMA of past steps' role gradients: a resumed run that
    started it afresh would log no coherence at its first step and damp differently."""
    config_file = _config_file(tmp_path, random_model_dir)
    ema = ["diagnostics.level=full", "algorithm.coherence_damping=0.5", "diagnostics.sketch_dim=64"]
    reference = train(load_config(config_file, ["run_name=reference", *ema]), progress=False)
    stopped = _stopped_and_resumed(tmp_path, config_file, monkeypatch, ema)
    step4 = next(row for row in _rows(stopped) if row["step"] == 4 and "train/success" in row)
    assert any(key.endswith("/coherence") for key in step4) and any(key.endswith("/damping_scale") for key in step4)
    _assert_same_run(stopped, reference)


def test_a_failing_step_still_releases_the_backend_and_the_workflow(tmp_path, random_model_dir, one_thread, monkeypatch):
    """Ray actors, rollout workers and sandbox workers must not outlive a run that raised."""
    closed = []
    real_backend, real_workflow = loop_module.make_backend, loop_module.build_workflow

    def spy_backend(*args, **kwargs):
        backend = real_backend(*args, **kwargs)
        backend.close = lambda: closed.append("backend")
        return backend

    def spy_workflow(*args, **kwargs):
        workflow = real_workflow(*args, **kwargs)
        workflow.close = lambda: closed.append("workflow")
        return workflow

    def fail(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(loop_module, "make_backend", spy_backend)
    monkeypatch.setattr(loop_module, "build_workflow", spy_workflow)
    monkeypatch.setattr(schedule_module, "rollout_step", fail)
    with pytest.raises(Stop):
        train(load_config(_config_file(tmp_path, random_model_dir), ["run_name=failing"]), progress=False)
    assert sorted(closed) == ["backend", "workflow"]
