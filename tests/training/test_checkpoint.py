"""Checkpoint folders and resume points, unit level: bit-exact restore, crashes mid-save, mid-replace and
mid-rotation, corrupt files, roll-back of a run directory, bad resume targets, stateful components."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
import torch
from safetensors.torch import load_file

from teamrl.config import ConfigError, load_config
from teamrl.policies.loading import Policy
from teamrl.policies.storage import load_policy_weights, save_policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.training import checkpoint as ckpt
from teamrl.training.resume import LoopState, find_resume_point, restore_training_state, save_training_state
from teamrl.training.run_dir import RunDirectory
from teamrl.training.update import make_optimizer
from toy import tiny_policy

UNIT = ["regime=per_role", "train.keep_last=2"]


def _setup(tmp_path: Path, seed: int = 0, run_name: str = "run"):
    config = load_config(None, [*UNIT, f"output_dir={tmp_path}", f"run_name={run_name}"])
    policies = {"tool": tiny_policy(seed=seed, name="tool"), "plan": tiny_policy(seed=seed + 1, name="plan")}
    optimizers = {n: make_optimizer(p, config.policy, config.train, 0.0) for n, p in policies.items()}
    return config, policies, optimizers


def _train_a_little(optimizers, rng_seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(rng_seed)
    for state in optimizers.values():
        for p in state.policy.model.parameters():
            p.grad = torch.randn(p.shape, generator=gen)
        state.optimizer.step()
        state.scheduler.step()


class Counter:
    """A stateful loop component (as diagnostics with running baselines would be)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def state_dict(self) -> dict:
        return {"value": self.value, "history": [float(self.value)] * 2}

    def load_state_dict(self, state: dict) -> None:
        self.value = state["value"]


def _save_step(config, policies, optimizers, step, resume=None, generator=None, rng=None):
    run = RunDirectory(config, resume)
    run.log(step, {"x": float(step)})
    with open(run.path / "alerts.jsonl", "a") as handle:  # another append-only log of the run
        handle.write(json.dumps({"step": step}) + "\n")
    path = save_training_state(run, LoopState(step, 0.25, 0.5, 1, 3.0), policies, optimizers,
                               generator or torch.Generator().manual_seed(7), rng or random.Random(7),
                               config.train.keep_last, {"counter": Counter(step)})
    run.close()
    return run, path


def test_restore_is_bit_exact(tmp_path):
    config, policies, optimizers = _setup(tmp_path)
    _train_a_little(optimizers)
    generator, rng = torch.Generator().manual_seed(3), random.Random(3)
    torch.rand(5, generator=generator)  # advance both streams past their seeds
    rng.random()
    _save_step(config, policies, optimizers, 1, generator=generator, rng=rng)
    expected_next = (torch.rand(4, generator=generator), rng.random(), torch.rand(3), random.random())

    config2, fresh, fresh_opt = _setup(tmp_path, seed=10)
    config2.train.resume = str(tmp_path / "run")
    point = find_resume_point(config2)
    gen2, rng2 = torch.Generator().manual_seed(99), random.Random(99)
    torch.manual_seed(1234)
    random.seed(1234)
    counter = Counter(0)
    loop = restore_training_state(point, fresh, fresh_opt, gen2, rng2, {"counter": counter})
    assert loop == LoopState(1, 0.25, 0.5, 1, 3.0, loop.log_bytes) and loop.log_bytes["metrics.jsonl"] > 0
    assert counter.value == 1
    for name in policies:
        for a, b in zip(policies[name].model.state_dict().values(), fresh[name].model.state_dict().values()):
            assert torch.equal(a, b)
        old, new = optimizers[name].optimizer.state_dict(), fresh_opt[name].optimizer.state_dict()
        for key in old["state"]:
            for field in ("exp_avg", "exp_avg_sq", "step"):
                assert torch.equal(old["state"][key][field], new["state"][key][field])
        assert optimizers[name].scheduler.state_dict() == fresh_opt[name].scheduler.state_dict()
    got_next = (torch.rand(4, generator=gen2), rng2.random(), torch.rand(3), random.random())
    # every stream (sampling generator, loop RNG, torch and Python globals) continues where it was saved
    assert torch.equal(got_next[0], expected_next[0]) and got_next[1] == expected_next[1]
    assert torch.equal(got_next[2], expected_next[2]) and got_next[3] == expected_next[3]


def test_crash_mid_save_leaves_nothing_loadable(tmp_path, monkeypatch):
    config, policies, optimizers = _setup(tmp_path)
    _save_step(config, policies, optimizers, 1)
    root = tmp_path / "run" / "checkpoints"

    def crash(folder: Path) -> None:  # weights are written by now; the crash hits before COMPLETE
        raise KeyboardInterrupt("killed mid-save")

    with pytest.raises(KeyboardInterrupt):
        ckpt.write_checkpoint(root, "step00002", policies, crash)
    partial = root / "step00002.partial"
    assert (partial / "tool" / "model.safetensors").exists() and not ckpt.is_complete(partial)
    assert not (root / "step00002").exists()
    with pytest.raises(ckpt.CheckpointError, match="not a complete checkpoint"):
        ckpt.verify(partial)
    assert [s for s, _ in ckpt.step_checkpoints(root)] == [1]
    config.train.resume = "auto"
    point = find_resume_point(config)
    assert point.checkpoint == root / "step00001" and not partial.exists()  # recover() removed it


def test_crash_while_replacing_keeps_one_complete_copy(tmp_path, monkeypatch):
    _, policies, optimizers = _setup(tmp_path)
    root = tmp_path / "ck"
    ckpt.write_checkpoint(root, "best", policies)
    _train_a_little(optimizers)
    real_rename = Path.rename

    def rename(self, target):
        if self.name.endswith(".partial"):
            raise KeyboardInterrupt("killed between the two renames")
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        ckpt.write_checkpoint(root, "best", policies)
    monkeypatch.setattr(Path, "rename", real_rename)
    assert not (root / "best").exists() and (root / "best.old").exists() and (root / "best.partial").exists()
    ckpt.recover(root)
    assert sorted(p.name for p in root.iterdir()) == ["best"]
    ckpt.verify(root / "best")
    saved = load_file(str(root / "best" / "tool" / "model.safetensors"))
    current = policies["tool"].model.state_dict()
    assert all(torch.equal(saved[k], current[k]) for k in saved)  # the newer copy won


def test_crash_while_rotating_leaves_no_half_deleted_checkpoint(tmp_path, monkeypatch):
    config, policies, optimizers = _setup(tmp_path)
    run, _ = _save_step(config, policies, optimizers, 1)
    config.train.resume = "auto"
    run, _ = _save_step(config, policies, optimizers, 2, resume=find_resume_point(config))

    def crash(path, *args, **kwargs):
        raise KeyboardInterrupt("killed while deleting")

    monkeypatch.setattr(ckpt.shutil, "rmtree", crash)
    with pytest.raises(KeyboardInterrupt):
        ckpt.rotate(run.checkpoints, keep_last=1)
    monkeypatch.undo()
    assert sorted(p.name for p in run.checkpoints.iterdir()) == ["step00001.deleting", "step00002"]
    assert find_resume_point(config).checkpoint == run.checkpoints / "step00002"
    assert sorted(p.name for p in run.checkpoints.iterdir()) == ["step00002"]


def test_corrupt_newest_checkpoint_is_skipped_and_rotation_keeps_last(tmp_path):
    config, policies, optimizers = _setup(tmp_path)
    config.train.keep_last = 2
    run, _ = _save_step(config, policies, optimizers, 1)
    config.train.resume = "auto"
    for step in (2, 3):
        run, _ = _save_step(config, policies, optimizers, step, resume=find_resume_point(config))
    root = run.checkpoints
    assert [s for s, _ in ckpt.step_checkpoints(root)] == [2, 3]
    weights = root / "step00003" / "plan" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size, different content: only the hash notices
    weights.write_bytes(bytes(data))
    assert find_resume_point(config).checkpoint == root / "step00002"
    config.train.resume = str(root / "step00003")
    with pytest.raises(ckpt.CheckpointError, match="differs from the manifest"):
        find_resume_point(config)


def test_resume_from_an_earlier_checkpoint_discards_the_later_ones(tmp_path):
    config, policies, optimizers = _setup(tmp_path)
    config.train.keep_last = 0
    config.train.resume = "auto"
    run, _ = _save_step(config, policies, optimizers, 1)
    size_at_1 = (run.path / "metrics.jsonl").stat().st_size
    assert size_at_1 > 0
    for step in (2, 3):
        run, _ = _save_step(config, policies, optimizers, step, resume=find_resume_point(config))
    run.save_checkpoint("final", policies)
    config.train.resume = str(run.checkpoints / "step00001")
    RunDirectory(config, find_resume_point(config)).close()
    assert sorted(p.name for p in run.checkpoints.iterdir()) == ["step00001"]
    assert (run.path / "metrics.jsonl").stat().st_size == size_at_1
    assert (run.path / "alerts.jsonl").read_text() == '{"step": 1}\n'


def test_tied_weights_load_bit_exactly(tmp_path):
    tok = build_char_tokenizer()
    source = Policy("p", build_tiny_model(tok, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, seed=1),
                    tok, False)
    target = Policy("p", build_tiny_model(tok, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, seed=2),
                    tok, False)
    save_policy(source, tmp_path / "p")
    load_policy_weights(target, tmp_path / "p")
    assert all(torch.equal(a, b) for a, b in zip(source.model.state_dict().values(),
                                                 target.model.state_dict().values()))
    assert target.model.lm_head.weight.data_ptr() == target.model.model.embed_tokens.weight.data_ptr()


def test_bad_resume_targets_fail_clearly(tmp_path):
    config, policies, optimizers = _setup(tmp_path)
    config.run_name = ""
    config.train.resume = "auto"
    with pytest.raises(ConfigError, match="needs a fixed run_name"):
        find_resume_point(config)
    config, _, _ = _setup(tmp_path)
    run, _ = _save_step(config, policies, optimizers, 1)
    run.save_checkpoint("best", policies)
    config.train.resume = str(run.checkpoints / "best")
    with pytest.raises(ConfigError, match="weights only"):
        find_resume_point(config)
    config.train.resume = str(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="no such folder"):
        find_resume_point(config)
    changed = load_config(None, [*UNIT, f"output_dir={tmp_path}", "run_name=run", "policy.lr=0.5",
                                 f"train.resume={run.path}"])
    with pytest.raises(ConfigError, match="policy.lr"):
        find_resume_point(changed)
    with pytest.raises(ConfigError, match="keep_last"):
        load_config(None, ["train.keep_last=-1"])


def test_cli_resume_of_a_missing_folder_fails_clearly(tmp_path, capsys):
    from teamrl.cli import main as cli_main

    (tmp_path / "run.yaml").write_text("regime: per_role\n")
    assert cli_main(["train", str(tmp_path / "run.yaml"), "--resume", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_alert_monitor_state_survives_a_checkpoint(tmp_path):
    """Diagnostics carry baselines, trailing windows, the held-out peak and active alerts across steps."""
    from teamrl.config import DiagnosticsConfig
    from teamrl.diagnostics.alerts import AlertMonitor

    config = DiagnosticsConfig(baseline_steps=2, window=2)
    stream = [{"diag/role/tool/grad_share": 0.9, "diag/role/plan/grad_share": 0.1,
               "diag/role/tool/response_len": 20.0, "diag/role/plan/response_len": 4.0 + 8 * max(0, step - 6),
               **({"eval/success": [0.5, 0.9, 0.9, 0.9, 0.5, 0.5][step // 2]} if step % 2 == 0 else {})}
              for step in range(12)]
    original = AlertMonitor(config, {"shared": ["tool", "plan"]})
    for step, metrics in enumerate(stream[:5]):
        original.observe(step, metrics)
    torch.save(original.state_dict(), tmp_path / "state.pt")
    resumed = AlertMonitor(config, {"shared": ["tool", "plan"]})
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    fresh = AlertMonitor(config, {"shared": ["tool", "plan"]})  # what a resume without the state would do
    fired = [(original.observe(step, m), resumed.observe(step, m), fresh.observe(step, m))
             for step, m in enumerate(stream[5:], 5)]
    assert any(a for a, _, _ in fired)  # the stream does raise alerts after the checkpoint
    assert all(a == b for a, b, _ in fired)
    assert any(a != c for a, _, c in fired)  # and they depend on the steps before it
    assert resumed.state_dict() == original.state_dict()


def test_resume_accepts_a_run_written_before_a_config_key_existed(tmp_path):
    from teamrl.config import config_to_dict, load_config
    from teamrl.training.resume import _check_same_run

    saved = config_to_dict(load_config(None))
    del saved["algorithm"]["trajectory_credit"]  # as written by a teamrl without that key
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved))
    _check_same_run(load_config(None), tmp_path)
    with pytest.raises(ConfigError, match="algorithm.k"):
        _check_same_run(load_config(None, ["algorithm.k=4"]), tmp_path)
