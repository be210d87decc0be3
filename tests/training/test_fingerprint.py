"""A run's fingerprint tells the same run from a nearly identical one: equal for a repeat, parted at the
first step whose sampled tokens or log-probs moved, and unchanged by a stop and resume."""

from __future__ import annotations

import json

import pytest
import torch

from teamrl.config import load_config
from teamrl.training.fingerprint import RunFingerprint, first_difference, samples_digest, tensors_digest
from teamrl.training.loop import train

OVERRIDES = ["regime=per_role", "task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2",
             "rollout.max_new_tokens=6", "train.steps=3", "train.batch_size=2", "train.eval_every=0",
             "train.eval_instances=2", "algorithm.k=2", "algorithm.drop_zero_signal=false",
             "algorithm.entropy_coef=0.05", "policy.lr=1e-2", "train.threads=1"]


@pytest.fixture
def run(tmp_path, random_model_dir):
    def go(name: str, *extra: str, first_steps: int | None = None) -> dict:
        config = load_config(None, [*OVERRIDES, f"policy.model={random_model_dir}", f"output_dir={tmp_path}",
                                    f"run_name={name}", *extra])
        run_dir = train(config, progress=False, first_steps=first_steps)
        return json.loads((run_dir / "summary.json").read_text())["fingerprint"]
    return go


def test_a_repeat_is_the_same_run_and_a_changed_update_parts_after_step_1(run):
    first, again = run("a"), run("b")
    assert first == again and first["complete"]
    assert sorted(first["rollouts"], key=int) == ["1", "2", "3"] and set(first["weights"]) == {"plan", "tool"}
    assert first_difference(first, again) is None
    # A learning rate changed in its last digits: step 1 samples from the same weights, and the first
    # update already moves a log-prob somewhere, though the runs may well end with equal results.
    nudged = run("c", "policy.lr=1.0000001e-2")
    assert nudged["rollouts"]["1"] == first["rollouts"]["1"]
    assert nudged["rollouts"]["2"] != first["rollouts"]["2"]
    assert first_difference(first, nudged) == "step 2's sampled tokens or their log-probs differ (step 1 is equal)"


def test_the_last_update_shows_in_the_weights_only():
    fp = {"rollouts": {"1": "aa", "2": "bb"}, "weights": {"plan": "01", "tool": "02"}, "complete": True}
    assert first_difference(fp, {**fp, "weights": {"plan": "01", "tool": "03"}}) == (
        "the final weights of policy 'tool' differ (every step's samples are equal)")
    assert first_difference(fp, {**fp, "rollouts": {"1": "aa"}}) == "the runs trained 2 and 1 steps"
    # A run resumed from a checkpoint that predates fingerprints knows only its later steps: those are compared.
    later = {"rollouts": {"2": "bb"}, "weights": fp["weights"], "complete": False}
    assert first_difference(fp, later) is None
    assert first_difference(fp, {**later, "rollouts": {"2": "zz"}}) == (
        "step 2's sampled tokens or their log-probs differ (no earlier step is compared)")


def test_digests_see_the_last_bit():
    t = torch.tensor([1.0, 2.0])
    assert tensors_digest([t]) == tensors_digest([t.clone()])
    assert tensors_digest([t]) != tensors_digest([torch.nextafter(t, torch.tensor(3.0))])
    assert tensors_digest([t]) != tensors_digest([t.to(torch.bfloat16)])  # dtype is part of it


def test_a_checkpoint_without_a_fingerprint_resumes_with_an_incomplete_one():
    fp = RunFingerprint()
    fp.load_state_dict(None)
    assert not fp.complete and fp.rollouts == {}
    fp.add(4, [])
    again = RunFingerprint()
    again.load_state_dict(fp.state_dict())
    assert again.rollouts == {4: samples_digest([])} and not again.complete


def test_a_runs_first_steps_alone_are_the_full_runs_first_steps(run):
    """The bit check plays the first steps with no held-out evaluation: the full run's evaluations draw
    from generators of their own, so its first steps are the same bit for bit."""
    full = run("full", "train.eval_every=1", "train.checkpoint_every=1", "algorithm.kl_coef=0.01")
    start = run("start", "train.eval_every=1", "train.checkpoint_every=1", "algorithm.kl_coef=0.01", first_steps=2)
    assert start["rollouts"] == {k: full["rollouts"][k] for k in ("1", "2")}
    assert start["weights"] != full["weights"]  # two updates, not three
