"""trainer.shard: fsdp through the Ray backend and the training loop: same updates, exact resume, bad input."""

import json

import pytest
import torch
from safetensors.torch import load_file

from test_backends import NAMES, Stop, _assert_same, _assert_same_run, _run, warm_model  # noqa: F401

from teamrl.config import ConfigError, TrainerConfig, load_config
from teamrl.training.backends.ray_backend import LOCAL_RAY

ray = pytest.importorskip("ray", reason="the Ray backend tests need Ray: pip install 'teamrl[ray]'")

FSDP = ("trainer.backend=ray", "trainer.shard=fsdp", "trainer.data_parallel=2")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, **LOCAL_RAY)
    yield
    ray.shutdown()


def test_sharded_ray_groups_match_local_updates_and_optimizer_state(local_ray):
    """Two policies, each sharded over 2 gloo ranks: metrics, weights sent back, and the gathered AdamW state."""
    local = _run(TrainerConfig())
    sharded = _run(TrainerConfig(backend="ray", shard="fsdp", data_parallel=2, num_cpus_per_policy=1.0))
    _assert_same(local, sharded)
    for name in NAMES:
        mine, theirs = local[2][name].optimizer.state_dict(), sharded[2][name].optimizer.state_dict()
        assert mine["state"].keys() == theirs["state"].keys() and mine["state"]
        for index, slots in mine["state"].items():
            for key in ("exp_avg", "exp_avg_sq"):
                assert theirs["state"][index][key].shape == slots[key].shape  # gathered whole, not a shard
        assert sharded[2][name].scheduler.last_epoch == local[2][name].scheduler.last_epoch == 2


@pytest.mark.parametrize("overrides, message", [
    (["trainer.shard=fsdp"], "shard: fsdp needs trainer.backend: ray"),
    ([*FSDP[:2], "trainer.data_parallel=4", "trainer.num_gpus_per_policy=2"],
     "data_parallel to at most 2"),
    ([*FSDP, "algorithm.minibatch_size=7"], "multiple of 2 \\(e.g. 8\\)"),
    ([*FSDP, "algorithm.coherence_damping=0.1"], "coherence_damping"),
    ([*FSDP, "algorithm.micro_batch_tokens=512"], "micro_batch_tokens=0"),
    (["trainer.shard=zero3"], "none or fsdp"),
    ([*FSDP, "trainer.shard_param_dtype=float16"], "float32 or bfloat16"),
])
def test_impossible_sharding_fails_at_config_load(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def _train(tmp_path, model_dir, run_name, *extra):
    from teamrl.training.loop import train

    config = load_config(None, [
        "task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2",
        "regime=per_role", "train.steps=3", "train.batch_size=4", "train.eval_every=0",
        "train.eval_instances=4", "algorithm.k=4", "algorithm.minibatch_size=16", "policy.lr=1e-2",
        "algorithm.drop_zero_signal=false", "train.checkpoint_every=1",
        "trainer.num_cpus_per_policy=0.5", f"output_dir={tmp_path}", f"run_name={run_name}",
        "diagnostics.alerts=false", "seed=2", *FSDP, *extra])
    run_dir = train(config, model_path=model_dir, progress=False)
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_sharded_run_stopped_after_a_checkpoint_resumes_exactly(tmp_path, warm_model, local_ray, monkeypatch):
    """The sharded AdamW state is gathered into the step checkpoint and re-sharded on resume.

    Stopped after step 1 of 3: step 2's update uses the restored AdamW state (its step count and
    moments) and step 3's rollouts and metrics show it; a resume that lost the state fails here.
    """
    from teamrl.training import loop as loop_module

    reference = _train(tmp_path, warm_model, "reference")
    # Rewards differ within some group at step 2, so it really trains (a random model would get equal rewards;
    # seed 2 is one whose step-2 groups have a reward spread under the engine's token draw).
    assert any(reference[2][f"policy/{name}/grad_norm"] > 0 for name in NAMES)
    real_save = loop_module.save_training_state

    def save_then_stop(run, state, *args, **kwargs):
        path = real_save(run, state, *args, **kwargs)
        if state.step == 1:
            raise Stop
        return path

    monkeypatch.setattr(loop_module, "save_training_state", save_then_stop)
    with pytest.raises(Stop):
        _train(tmp_path, warm_model, "stopped")
    monkeypatch.setattr(loop_module, "save_training_state", real_save)
    resumed = _train(tmp_path, warm_model, "stopped", "train.resume=auto")
    _assert_same_run(reference, resumed)
    # The metrics' tolerance (1e-4) would hide a lost AdamW state here (it moves the entropy by 5e-5): the
    # final weights are compared too.
    for name in NAMES:
        final = [load_file(tmp_path / run / "checkpoints" / "final" / name / "model.safetensors")
                 for run in ("reference", "stopped")]
        assert final[0].keys() == final[1].keys()
        for key, value in final[0].items():
            torch.testing.assert_close(final[1][key], value, atol=1e-6, rtol=0, msg=f"{name} {key}")
