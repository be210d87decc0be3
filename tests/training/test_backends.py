"""The Ray backend reproduces the single-process backend: same updates, same weights, same run."""

import dataclasses
import json
import os
import random

import pytest
import torch

from update_fixtures import lora_optimizers, policy_optimizer, synthetic_samples

from teamrl.config import AlgorithmConfig, ConfigError, TrainerConfig, load_config
from teamrl.training.backends import UpdateSettings, make_backend, update_seeds
from teamrl.training.backends.ray_backend import network_groups

ray = pytest.importorskip("ray", reason="the Ray backend tests need Ray: pip install 'teamrl[ray]'")

TASK = {"name": "plan_path", "size": 4, "min_distance": 2}
NAMES = ("plan", "tool")


@pytest.fixture(scope="module")
def local_ray():
    """One small local Ray for the module (the backends find it running and leave it running)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _optimizers():
    return {name: policy_optimizer(name, seed=3 + i) for i, name in enumerate(NAMES)}


def _batches():
    return {name: synthetic_samples(name, roles=(name,), seed=10 + i) for i, name in enumerate(NAMES)}


def _settings():
    return UpdateSettings(dataclasses.replace(AlgorithmConfig(), minibatch_size=7), 1.0, 0.5)


def _run(trainer, steps=2, make=_optimizers, settings=None):
    """`steps` updates of two policies; returns their metrics, the driver's weights and optimizers."""
    optimizers = make()
    backend = make_backend(trainer, optimizers, settings or _settings())
    rng = random.Random(5)
    try:
        metrics = [{n: r.stats for n, r in backend.update(_batches(), rng).items()} for _ in range(steps)]
        backend.pull_optimizer_state()
    finally:
        backend.close()
    weights = {n: {k: v.clone() for k, v in o.policy.model.state_dict().items()} for n, o in optimizers.items()}
    return metrics, weights, optimizers


def _assert_same(a, b, atol=1e-5):
    metrics_a, weights_a, _ = a
    metrics_b, weights_b, _ = b
    for step_a, step_b in zip(metrics_a, metrics_b, strict=True):
        assert step_a.keys() == step_b.keys() == set(NAMES)
        for name in NAMES:
            for key, value in step_a[name].items():
                assert step_b[name][key] == pytest.approx(value, rel=1e-4, abs=1e-6), (name, key)
    for name in NAMES:
        for key, value in weights_a[name].items():
            torch.testing.assert_close(weights_b[name][key], value, atol=atol, rtol=0, msg=f"{name} {key}")


def test_update_seeds_are_drawn_in_policy_order():
    rng = random.Random(1)
    expected = [rng.getrandbits(63) for _ in range(2)]
    assert list(update_seeds(["b", "a"], random.Random(1)).items()) == [("b", expected[0]), ("a", expected[1])]


def test_bad_trainer_settings_fail_clearly():
    with pytest.raises(ConfigError, match="trainer.backend"):
        load_config(None, ["trainer.backend=spark"])
    with pytest.raises(ConfigError, match="needs trainer.backend: ray"):
        make_backend(TrainerConfig(data_parallel=2), _optimizers(), _settings())


def test_ray_updates_match_local_updates_and_sync_weights_back(local_ray):
    local = _run(TrainerConfig())
    remote = _run(TrainerConfig(backend="ray"))
    _assert_same(local, remote)
    untouched = _optimizers()
    for name in NAMES:  # the driver's copies did move: the actors' weights came back
        before = untouched[name].policy.model.state_dict()
        assert any(not torch.equal(before[k], v) for k, v in remote[1][name].items())
        # optimizer state pulled from the actor equals the one the local backend built in place
        local_state = local[2][name].optimizer.state_dict()["state"]
        remote_state = remote[2][name].optimizer.state_dict()["state"]
        assert local_state.keys() == remote_state.keys() and local_state
        for index, slots in local_state.items():
            torch.testing.assert_close(remote_state[index]["exp_avg_sq"], slots["exp_avg_sq"], atol=1e-8, rtol=1e-4)
        assert remote[2][name].scheduler.last_epoch == local[2][name].scheduler.last_epoch == 2


def test_ray_data_parallel_group_matches_local(local_ray):
    local = _run(TrainerConfig(), steps=1)
    parallel = _run(TrainerConfig(backend="ray", data_parallel=2, num_cpus_per_policy=1.0), steps=1)
    _assert_same(local, parallel)


def test_lora_adapters_of_one_base_update_in_one_actor(local_ray):
    make = lambda: lora_optimizers(NAMES)  # noqa: E731
    assert network_groups(make()) == [list(NAMES)]  # one actor holds the base once
    algo = dataclasses.replace(AlgorithmConfig(), minibatch_size=7, kl_coef=0.05)
    settings = UpdateSettings(algo, 1.0, 0.5)
    local = _run(TrainerConfig(), steps=1, make=make, settings=settings)
    remote = _run(TrainerConfig(backend="ray"), steps=1, make=make, settings=settings)
    _assert_same(local, remote)
    before = make()[NAMES[0]].policy.network.state_dict()
    after = remote[2][NAMES[0]].policy.network.state_dict()
    changed = {k for k, v in after.items() if not torch.equal(before[k], v)}
    assert changed and all("lora_" in k for k in changed)  # only adapters came back changed
    assert {n for n in NAMES if any(f".{n}." in k for k in changed)} == set(NAMES)  # both adapters trained


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory):
    """A quickly warmed-up tiny model in a private cache."""
    from teamrl.training.tiny_default import WarmupRecipe, warm_up

    recipe = WarmupRecipe.for_task(TASK, max_turns=2, steps=10, batch_size=16, lr=3e-3)
    os.environ["TEAMRL_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    try:
        return str(warm_up(recipe, verbose=False))
    finally:
        del os.environ["TEAMRL_CACHE"]


def _train(tmp_path, warm_model, backend):
    from teamrl.training.loop import train

    config = load_config(None, [
        "task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2",
        "regime=per_role", "train.steps=3", "train.batch_size=4", "train.eval_every=0",
        "train.eval_instances=6", "algorithm.k=4", "algorithm.minibatch_size=16", "policy.lr=1e-3",
        "algorithm.drop_zero_signal=false",  # every policy trains at every step, so both losses exist
        f"trainer.backend={backend}", f"output_dir={tmp_path}", f"run_name={backend}",
        "diagnostics.alerts=false"])  # alerts read metrics only; they are not part of what a backend does
    run_dir = train(config, model_path=warm_model, progress=False)
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_ray_run_matches_single_process_run(tmp_path, warm_model, local_ray):
    local = _train(tmp_path, warm_model, "local")
    remote = _train(tmp_path, warm_model, "ray")
    assert len(local) == len(remote) >= 4
    compared = set()
    for row_local, row_remote in zip(local, remote):
        keys = {k for k in row_local if not k.startswith("time/")}
        assert keys == {k for k in row_remote if not k.startswith("time/")}
        for key in keys:
            if isinstance(row_local[key], (int, float)):
                assert row_remote[key] == pytest.approx(row_local[key], rel=1e-4, abs=1e-5), key
                compared.add(key)
    for key in ("policy/plan/loss", "policy/tool/loss", "train/success", "role/plan/reward", "eval/success"):
        assert key in compared, key
