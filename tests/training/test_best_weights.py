"""The best checkpoint: in memory until the end when checkpointing is off, on disk at once when it is on,
and a hard-linked copy of `final` when the best step is the last one."""

import os
from types import SimpleNamespace

import torch

from teamrl.training.best_weights import BestWeights
from teamrl.training.checkpoint import is_complete, read_manifest, verify, write_checkpoint
from toy import tiny_policy


class FakeRun:
    """save_checkpoint as the RunDirectory does it, recording the first weight at each save."""

    def __init__(self, root):
        self.root, self.saves = root, []

    def save_checkpoint(self, tag, policies):
        self.saves.append((tag, float(next(policies["p"].model.parameters()).detach().flatten()[0])))
        return write_checkpoint(self.root, tag, policies)


def setup(tmp_path, on_disk):
    policy = tiny_policy()
    optimizer = SimpleNamespace(optimizer=torch.optim.SGD(list(policy.model.parameters()), lr=0.1))
    run = FakeRun(tmp_path / "checkpoints")
    return run, policy, BestWeights(run, {"p": policy}, {"p": optimizer}, on_disk=on_disk)


def set_first_weight(policy, value):
    with torch.no_grad():
        next(policy.model.parameters()).view(-1)[0] = value


def test_off_keeps_the_best_in_memory_and_writes_it_once_at_the_end(tmp_path):
    run, policy, best = setup(tmp_path, on_disk=False)
    set_first_weight(policy, 1.0)
    best.record(0)
    set_first_weight(policy, 2.0)
    best.record(3)
    set_first_weight(policy, 5.0)
    assert run.saves == []  # nothing written during training
    best.finish(final_step=6)
    assert run.saves == [("final", 5.0), ("best", 2.0)]
    assert float(next(policy.model.parameters()).detach().flatten()[0]) == 5.0  # the final weights are back
    verify(run.root / "best")
    verify(run.root / "final")


def test_best_at_the_last_step_is_final_by_hard_links(tmp_path):
    run, policy, best = setup(tmp_path, on_disk=False)
    best.record(0)
    set_first_weight(policy, 4.0)
    best.record(6, last=True)
    best.finish(final_step=6)
    assert run.saves == [("final", 4.0)]
    verify(run.root / "best")  # every file's size and hash, under its own tag
    assert read_manifest(run.root / "best")["tag"] == "best"
    weights = [p for p in (run.root / "best" / "p").iterdir() if p.is_file()]
    assert weights and all(os.path.samefile(p, run.root / "final" / "p" / p.name) for p in weights)


def test_on_writes_each_new_best_at_once_for_a_resume(tmp_path):
    run, policy, best = setup(tmp_path, on_disk=True)
    set_first_weight(policy, 1.0)
    best.record(0)
    set_first_weight(policy, 2.0)
    best.record(2)
    assert run.saves == [("best", 1.0), ("best", 2.0)] and is_complete(run.root / "best")
    set_first_weight(policy, 3.0)
    best.finish(final_step=4)
    assert run.saves[-1] == ("final", 3.0) and len(run.saves) == 3  # best stays the step-2 folder
