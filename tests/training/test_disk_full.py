"""A disk that fills up mid-run: one line that says so and how to resume, no partial checkpoint
taken for complete, and the printed command resumes from the last complete checkpoint."""

from __future__ import annotations

import errno
import json
import shlex
from pathlib import Path

import pytest
import torch
import yaml

from teamrl.cli import main as cli_main
from teamrl.config import config_to_dict, load_config
from teamrl.training import disk_full
from teamrl.training.checkpoint import MARKER, is_complete
from teamrl.training.disk_full import is_disk_full

OVERRIDES = ["regime=shared", "task.name=plan_path", "task.size=4", "task.min_distance=2", "workflow.max_turns=2",
             "rollout.max_new_tokens=6", "train.batch_size=2", "train.eval_every=0", "train.eval_instances=2",
             "algorithm.k=2", "diagnostics.level=none", "train.steps=3", "train.checkpoint_every=1",
             "train.keep_last=0"]
# What torch.save to a path raises on a full disk (torch 2.x): no errno, no "space" in it.
TORCH_WRITER_ERROR = "[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598"


def _full_disk_at(folder: str, wrapped: bool):
    """A torch.save that fails like a full disk for files under checkpoints/<folder>, after writing part of one."""
    real = torch.save

    def save(obj, target, *args, **kwargs):
        path = target if isinstance(target, (str, Path)) else target.name  # a path, or a file teamrl opened
        if f"/{folder}/" not in str(path):
            return real(obj, target, *args, **kwargs)
        Path(path).write_bytes(b"\0" * 64)  # a partial file: the checkpoint must not count as complete
        full = OSError(errno.ENOSPC, "No space left on device")
        if wrapped:  # the form torch gives when the OSError comes from inside its writer
            raise RuntimeError(TORCH_WRITER_ERROR) from full
        raise full
    return save


@pytest.mark.parametrize("wrapped", [False, True], ids=["oserror", "torch-runtime-error"])
def test_a_full_disk_is_named_and_the_run_resumes(tmp_path, capsys, monkeypatch, random_model_dir, wrapped):
    config = load_config(None, [*OVERRIDES, f"policy.model={random_model_dir}", f"output_dir={tmp_path / 'runs'}"])
    config_file = tmp_path / "run.yaml"
    config_file.write_text(yaml.safe_dump(config_to_dict(config)))
    run = tmp_path / "runs" / "full"
    monkeypatch.setattr(torch, "save", _full_disk_at("step00002.partial", wrapped))
    assert cli_main(["train", str(config_file), "run_name=full"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # above it: transformers' progress bars
    assert err.startswith(f"teamrl: error: disk full while writing checkpoint {run / 'checkpoints' / 'step00002'}; "
                          "free space on that disk, then resume. The run stopped after step 2 of 3"), err
    assert f"newest resumable checkpoint {run / 'checkpoints' / 'step00001'}" in err and "Traceback" not in err
    resume = shlex.split(err.split("Resume with: ", 1)[1])
    assert resume == ["teamrl", "train", str(run / "config.yaml"), "--resume", str(run)]
    # The partial checkpoint is gone (it held the space a retry needs); the complete one is intact.
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best", "step00001"]
    assert is_complete(run / "checkpoints" / "step00001")
    monkeypatch.undo()  # space was freed
    assert cli_main(resume[1:]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "train/success" in row] == [1, 2, 3]  # step 2 redone, logged once
    assert (run / "summary.json").is_file() and (run / "checkpoints" / "step00003" / MARKER).is_file()


def test_torch_writer_errors_count_as_a_full_disk_only_on_a_full_disk(tmp_path, monkeypatch):
    error = RuntimeError(TORCH_WRITER_ERROR)
    monkeypatch.setattr(disk_full, "_free_bytes", lambda where: 1 << 40)
    assert not is_disk_full(error, tmp_path)  # plenty of room: some other write failure
    monkeypatch.setattr(disk_full, "_free_bytes", lambda where: 4096)
    assert is_disk_full(error, tmp_path) and not is_disk_full(error)  # without a path there is no telling
    assert is_disk_full(RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
                                     'message: "No space left on device" })'))  # safetensors
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"), tmp_path)


def test_a_full_disk_outside_a_run_says_to_run_again(capsys, monkeypatch):
    from teamrl.training import loop

    def train(config):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/cache/model.safetensors")
    monkeypatch.setattr(loop, "train", train)
    assert cli_main(["train", str(Path(loop.__file__).parents[1] / "configs" / "plan_path_team.yaml")]) == 2
    assert capsys.readouterr().err.strip() == ("teamrl: error: disk full while writing /data/cache/model.safetensors; "
                                               "free space on that disk and run the command again")
