"""trainer.rollout_schedule: pipelined: the rollout worker plays step t+1 with the weights before update t while
the policies update on step t. Without overlap (rollout_staleness: 0) the run is the serial one bit for bit;
with it, which weights sample which step is fixed (version max(t-2, 0) for step t), a seed gives one run,
each update's new weights reach the worker, and a run killed with SIGKILL resumes to the uninterrupted run."""

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

from test_resume import _final_weights, _rows  # metrics without wall-clock values; saved tensors

from teamrl.cli import main as cli_main
from teamrl.config import ConfigError, config_to_dict, load_config
from teamrl.training import checkpoint as ckpt
from teamrl.training import schedule as schedule_module
from teamrl.training.backends.ray_backend import LOCAL_RAY
from teamrl.training.loop import train

ray = pytest.importorskip("ray", reason="the pipelined schedule's rollout workers are Ray actors")

# A random tiny model, few tokens: a step takes a fraction of a second; starting the Ray actors dominates.
# drop_zero_signal off and an entropy term: every step moves the weights (near-uniform samples tie).
BASE = [
    "task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2",
    "rollout.max_new_tokens=6", "train.steps=4", "train.batch_size=2", "train.eval_every=2",
    "train.eval_instances=2", "train.warmup_steps=2", "train.checkpoint_every=1", "algorithm.k=2",
    "algorithm.drop_zero_signal=false", "algorithm.entropy_coef=0.05", "policy.lr=1e-2",
    "algorithm.rollout_correction=tis", "trainer.backend=ray", "trainer.rollout_workers=1",
    "trainer.num_cpus_per_policy=0.5", "trainer.num_cpus_per_rollout_worker=0.5", "train.threads=1",
]
PIPELINED = ["trainer.rollout_schedule=pipelined"]


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray with 2 CPUs for the module; a run finds it running and leaves it running."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the driver's arithmetic as in a killed child run (OMP_NUM_THREADS=1)
    ray.init(num_cpus=2, **LOCAL_RAY)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()
    torch.set_num_threads(before)


def _config(tmp_path: Path, model: Path, *extra: str):
    return load_config(None, [*BASE, f"policy.model={model}", f"output_dir={tmp_path / 'runs'}", *extra])


def _assert_same_run(got: Path, want: Path) -> None:
    """Equal metrics (every number, bit for bit), final weights and summary."""
    assert _rows(got) == _rows(want)
    expected, actual = _final_weights(want), _final_weights(got)
    assert expected and set(actual) == set(expected)
    for name in expected:
        assert expected[name] and all(torch.equal(actual[name][k], expected[name][k]) for k in expected[name]), name
    drop = {"train_seconds"}
    summary = {k: v for k, v in json.loads((got / "summary.json").read_text()).items() if k not in drop}
    assert summary == {k: v for k, v in json.loads((want / "summary.json").read_text()).items() if k not in drop}


def _losses(run_dir: Path, policy: str) -> list[float]:
    return [row[f"policy/{policy}/loss"] for row in _rows(run_dir) if f"policy/{policy}/loss" in row]


def test_bad_pipeline_settings_fail_with_one_clear_error():
    with pytest.raises(ConfigError, match=r"rollout_schedule: pipelined .* set trainer.rollout_workers=1"):
        load_config(None, PIPELINED)
    with pytest.raises(ConfigError, match=r"algorithm.rollout_correction = 'none' .* trainer.rollout_staleness=0"):
        load_config(None, [*BASE, *PIPELINED, "algorithm.rollout_correction=none"])
    with pytest.raises(ConfigError, match="trainer.rollout_staleness = 2 is invalid: expected 0 or 1"):
        load_config(None, [*BASE, *PIPELINED, "trainer.rollout_staleness=2"])
    with pytest.raises(ConfigError, match="trainer.rollout_schedule = 'async' is invalid: expected serial or pipelined"):
        load_config(None, [*BASE, "trainer.rollout_schedule=async"])
    # without overlap no sample is stale: no correction needed
    load_config(None, [*BASE, *PIPELINED, "trainer.rollout_staleness=0", "algorithm.rollout_correction=none"])


def test_pipeline_without_overlap_is_the_serial_run_bit_for_bit(tmp_path, random_model_dir, local_ray):
    extra = ["regime=per_role"]
    serial = train(_config(tmp_path, random_model_dir, *extra, "run_name=serial"), progress=False)
    piped = train(_config(tmp_path, random_model_dir, *extra, *PIPELINED, "trainer.rollout_staleness=0",
                          "run_name=piped"), progress=False)
    _assert_same_run(piped, serial)
    rows = [r for r in _rows(piped) if "policy/plan/loss" in r]
    assert len(rows) == 4 and all(r["rollout_correction/plan/staleness"] == 0 for r in rows)
    assert len(set(_losses(piped, "plan"))) == 4  # the weights moved: a stale sampler would show


def _kill_at(proc: subprocess.Popen, marker: Path, outcome: dict) -> None:
    """SIGKILL `proc` as soon as `marker` exists; records whether it was still running then."""
    deadline = time.time() + 600
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    outcome["running"] = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    outcome["code"] = proc.wait()


def test_pipelined_run_is_fixed_hands_weights_over_and_resumes_after_sigkill(
    tmp_path, random_model_dir, local_ray, monkeypatch
):
    """One pipelined run, killed with SIGKILL right after its step-2 checkpoint (step 3's rollout is
    already played then) in a child process, and resumed, equals the uninterrupted one run here: the
    run is a function of the seed, and the checkpoint replays the rollout in flight. The uninterrupted
    run also records which weights version sampled each step and what the worker holds after each update."""
    config = _config(tmp_path, random_model_dir, *PIPELINED)
    config_file = tmp_path / "run.yaml"
    config_file.write_text(yaml.safe_dump(config_to_dict(config)))
    killed = tmp_path / "runs" / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "RAY_ADDRESS": local_ray}
    log = open(tmp_path / "killed.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "teamrl.cli", "train", str(config_file), "run_name=killed"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    outcome: dict = {}
    killer = threading.Thread(target=_kill_at, args=(proc, killed / "checkpoints" / "step00002" / ckpt.MARKER,
                                                     outcome))
    killer.start()

    sampled: dict[int, set[int]] = {}  # step -> weights versions of its samples
    handed: list[tuple[int, list[int]]] = []  # (trainer's version, the worker's) whenever the pipeline settles
    real_take, real_settle = schedule_module.PipelinedSchedule.take, schedule_module.PipelinedSchedule.settle

    def take(self, step):
        rollout = real_take(self, step)
        sampled[step] = {s.weights_version for s in rollout.samples}
        return rollout

    def settle(self):
        waited = real_settle(self)
        handed.append((self.held_version, self.pool.versions()))
        return waited

    monkeypatch.setattr(schedule_module.PipelinedSchedule, "take", take)
    monkeypatch.setattr(schedule_module.PipelinedSchedule, "settle", settle)
    try:  # the uninterrupted reference runs meanwhile, in this process
        reference = train(load_config(config_file, ["run_name=reference"]), progress=False)
    finally:
        killer.join()
        log.close()
    monkeypatch.undo()
    assert outcome["running"], f"the run ended before it was killed: {(tmp_path / 'killed.log').read_text()[-2000:]}"
    assert outcome["code"] == -signal.SIGKILL and not (killed / "summary.json").exists()

    # version max(t - 2, 0) samples step t; after update t the worker holds version t, as the trainer
    assert sampled == {1: {0}, 2: {0}, 3: {1}, 4: {2}}
    assert [trainer for trainer, _ in handed] == [0, 1, 2, 3, 4]
    assert all(worker == [trainer] for trainer, worker in handed)
    rows = [r for r in _rows(reference) if "policy/shared/loss" in r]
    assert [r["rollout_correction/shared/staleness"] for r in rows] == [0, 1, 1, 1]
    assert all(r["rollout_correction/shared/is_weight_mean"] != 1.0 for r in rows[1:])

    monkeypatch.setenv("RAY_ADDRESS", local_ray)
    assert cli_main(["train", str(config_file), "run_name=killed", "--resume", str(killed)]) == 0
    _assert_same_run(killed, reference)
