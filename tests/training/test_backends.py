"""The Ray backend reproduces the single-process backend: same updates, same weights, same run."""

import dataclasses
import json
import os
import random

import pytest
import torch

from update_fixtures import lora_optimizers, policy_optimizer, synthetic_samples

from teamrl.config import AlgorithmConfig, ConfigError, TrainerConfig, load_config
from teamrl.diagnostics.session import TrackerFactory
from teamrl.training.backends import make_backend
from teamrl.training.backends.base import UpdateSettings, update_seeds
from teamrl.training.backends.ray_backend import LOCAL_RAY, network_groups

ray = pytest.importorskip("ray", reason="the Ray backend tests need Ray: pip install 'teamrl[ray]'")

TASK = {"name": "plan_path", "size": 4, "min_distance": 2}
NAMES = ("plan", "tool")


@pytest.fixture(scope="module")
def local_ray():
    """One small local Ray for the module (the backends find it running and leave it running)."""
    ray.init(num_cpus=2, **LOCAL_RAY)
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
        metrics = [{n: r.stats for n, r in backend.update(_batches(), update_seeds(list(optimizers), rng)).items()}
                   for _ in range(steps)]
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
                if key == "peak_memory_mb":  # measured, not computed: differs between processes
                    continue
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
    from teamrl.setup.tiny_default import WarmupRecipe, warm_up

    recipe = WarmupRecipe.for_task(TASK, max_turns=2, steps=10, batch_size=16, lr=3e-3)
    os.environ["TEAMRL_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    try:
        return str(warm_up(recipe, verbose=False))
    finally:
        del os.environ["TEAMRL_CACHE"]


def _train(tmp_path, warm_model, backend, *extra):
    from teamrl.training.loop import train

    config = load_config(None, [
        "task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2",
        "regime=per_role", "train.steps=3", "train.batch_size=4", "train.eval_every=0",
        "train.eval_instances=6", "algorithm.k=4", "algorithm.minibatch_size=16", "policy.lr=1e-3",
        "algorithm.drop_zero_signal=false",  # every policy trains at every step, so both losses exist
        f"trainer.backend={backend}", f"output_dir={tmp_path}", "run_name=" + "_".join([backend] + [e.split("=")[-1] for e in extra]),
        "diagnostics.alerts=false", *extra])  # alerts read metrics only; they are not part of what a backend does
    run_dir = train(config, model_path=warm_model, progress=False)
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_ray_run_matches_single_process_run(tmp_path, warm_model, local_ray):
    """Ray updates; with one rollout worker the episodes are also played in an actor, from the
    driver's sampling states, and its weights are synchronised after every update."""
    local = _train(tmp_path, warm_model, "local")
    for workers in (0, 1):
        remote = _train(tmp_path, warm_model, "ray", f"trainer.rollout_workers={workers}",
                        "trainer.num_cpus_per_policy=0.5")  # 2 groups + 1 rollout worker fit in 2 CPUs
        _assert_same_run(local, remote)


def _assert_same_run(local, remote):
    assert len(local) == len(remote) >= 4
    compared = set()
    for row_local, row_remote in zip(local, remote):
        keys = {k for k in row_local if not k.startswith("time/") and not k.endswith("/peak_memory_mb")}
        assert keys == {k for k in row_remote if not k.startswith("time/") and not k.endswith("/peak_memory_mb")}
        for key in keys:
            if isinstance(row_local[key], (int, float)):
                assert row_remote[key] == pytest.approx(row_local[key], rel=1e-4, abs=1e-5), key
                compared.add(key)
    for key in ("policy/plan/loss", "policy/tool/loss", "train/success", "role/plan/reward", "eval/success"):
        assert key in compared, key


def test_rollout_workers_shard_deterministically_and_receive_weights(warm_model, local_ray):
    from teamrl.rollout.builtin_engine import SamplingParams
    from teamrl.rollout.tree import RewardWeights
    from teamrl.training.backends.rollout_workers import RolloutPool, shards
    from teamrl.setup.team import build_policies, build_workflow
    from teamrl.training.update import make_optimizer

    assert shards(list(range(5)), 2) == [[0, 1, 2], [3, 4]] and shards([7], 2) == [[7], []]
    with pytest.raises(ConfigError, match="rollout_workers > 0 needs trainer.backend: ray"):
        load_config(None, ["trainer.rollout_workers=2"])
    config = load_config(None, ["task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2",
                                "trainer.backend=ray", "trainer.rollout_workers=2",
                                "trainer.num_cpus_per_rollout_worker=0.5"])
    workflow = build_workflow(config)
    policies, mapping = build_policies(config, workflow, warm_model)
    pool = RolloutPool(config, policies, mapping)

    def play(seed):
        rng = random.Random(seed)
        samples, episodes = pool.run_episodes([0, 1, 2], "train", SamplingParams(1.0, 1.0, 0, 24), 2,
                                              RewardWeights(), torch.Generator().manual_seed(seed), rng)
        return [(s.episode, s.instance, s.generation.response_ids, s.generation.logprobs) for s in samples], episodes

    try:
        first, episodes = play(4)
        assert [e.instance for e in episodes] == [0, 1, 2]
        assert {(episode, instance) for episode, instance, *_ in first} == {(0, 0), (1, 1), (2, 2)}
        assert play(4)[0] == first  # the same seed and worker count give the same rollouts
        optimizer = make_optimizer(policies["shared"], config.policy_config("shared"), config.train, False)
        with torch.no_grad():
            for p in optimizer.policy.network.parameters():
                p.add_(0.05 * torch.randn_like(p))
        pool.sync({"shared": optimizer})
        again = play(4)[0]  # the workers sample with the new weights: same tokens are scored differently
        assert [row[3] for row in again] != [row[3] for row in first]
    finally:
        pool.close()


def _tracker_states(trainer, states=None):
    """Tracker states after one update with full per-role tracking (loaded from `states` first, if given)."""
    factory = TrackerFactory(full=True, damping=0.0, tau=0.9, sketch_dim=64, exact_max_params=10**7, seed=0)
    settings = dataclasses.replace(_settings(), tracker_factory=factory)
    backend = make_backend(trainer, _optimizers(), settings)
    try:
        if states is not None:
            backend.load_tracker_states(states)
        backend.update(_batches(), update_seeds(list(NAMES), random.Random(5)))
        return backend.tracker_states()
    finally:
        backend.close()


def test_ray_tracker_states_match_local_and_restore(local_ray):
    local, remote = _tracker_states(TrainerConfig()), _tracker_states(TrainerConfig(backend="ray"))
    assert set(local) == set(remote) == set(NAMES)
    for name in NAMES:
        assert set(local[name]["ema"]) == {name} and float(local[name]["ema"][name].norm()) > 0
        torch.testing.assert_close(remote[name]["ema"][name], local[name]["ema"][name], atol=1e-5, rtol=1e-4)
    # A restored EMA is what the next step folds into: tau * restored + (1 - tau) * this step's sketch.
    fresh = _tracker_states(TrainerConfig())
    for trainer in (TrainerConfig(), TrainerConfig(backend="ray")):
        resumed = _tracker_states(trainer, states=local)
        for name in NAMES:
            expected = 0.9 * local[name]["ema"][name] + 0.1 * fresh[name]["ema"][name]
            torch.testing.assert_close(resumed[name]["ema"][name], expected, atol=1e-5, rtol=1e-4)


class Stop(Exception):
    """Stands for the driver dying right after a checkpoint."""


@pytest.mark.parametrize("workers", [0, 2])
def test_ray_run_stopped_after_a_checkpoint_resumes_exactly(tmp_path, warm_model, local_ray, monkeypatch, workers):
    """Also with two rollout workers, whose per-step sampling seeds come from the checkpointed loop RNG."""
    from teamrl.training import loop as loop_module

    extra = ("trainer.num_cpus_per_policy=0.5", "trainer.num_cpus_per_rollout_worker=0.5",
             f"trainer.rollout_workers={workers}", "train.checkpoint_every=1")
    reference = _train(tmp_path, warm_model, "ray", *extra, "run_name=reference")
    real_save = loop_module.save_training_state

    def save_then_stop(run, state, *args, **kwargs):
        path = real_save(run, state, *args, **kwargs)
        if state.step == 2:
            raise Stop
        return path

    monkeypatch.setattr(loop_module, "save_training_state", save_then_stop)
    with pytest.raises(Stop):
        _train(tmp_path, warm_model, "ray", *extra, "run_name=stopped")
    monkeypatch.setattr(loop_module, "save_training_state", real_save)
    resumed = _train(tmp_path, warm_model, "ray", *extra, "run_name=stopped", "train.resume=auto")
    _assert_same_run(reference, resumed)

