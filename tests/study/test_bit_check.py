"""`teamrl study --check-bits N`: every run of a folder's cells replayed for its first N steps and compared
with its recorded fingerprint; a run whose recorded steps were changed is named as parted."""

import dataclasses
import json

import pytest

from teamrl.cli import main as cli_main
from teamrl.config import ConfigError
from teamrl.study.bit_check import check_bits
from teamrl.study.command import planned
from teamrl.study.rows import ROWS, study
from teamrl.study.runner import run_study

TINY = ["train.steps=2", "train.batch_size=1", "algorithm.k=2", "rollout.max_new_tokens=4", "train.threads=1"]


def _run(out, model, keys):
    chosen, protocol, overrides = planned(study("real_split_calc").with_model(str(model)), quick=True)
    protocol = dataclasses.replace(protocol, validation_instances=2, test_instances=2)
    return run_study(chosen, protocol, [ROWS[k] for k in keys], out, [*overrides, *TINY], log=lambda line: None)


def test_every_run_is_replayed_and_a_changed_step_is_named(tmp_path, random_model):
    _run(tmp_path, random_model, ["team", "single_grpo", "alone"])
    lines = []
    check = check_bits(tmp_path, 2, log=lines.append)
    # The eval row trains nothing; single_grpo trains one run and alone one run per role.
    assert sorted(v["run"] for v in check["runs"]) == ["alone-analyst-s0", "alone-calculator-s0", "single_grpo-s0"]
    assert check["same"] == 3 and all(v["same"] for v in check["runs"])
    assert lines[-1] == "bit check: 3 of 3 run(s) bit-identical over their first 2 step(s)"
    target = tmp_path / "results.json"
    made = json.loads(target.read_text())
    assert [c["same"] for c in made["bit_checks"]] == [3] and made["bit_checks"][0]["cpu"]
    record = next(r for r in made["results"] if r["row"] == "single_grpo")
    record["fingerprints"]["single_grpo-s0"]["rollouts"]["2"] = "0" * 16  # as if another code had sampled it
    target.write_text(json.dumps(made))
    lines.clear()
    assert cli_main(["study", "real_split_calc", "--out", str(tmp_path), "--check-bits", "2"]) == 1
    check = json.loads(target.read_text())["bit_checks"][-1]
    parted = [v for v in check["runs"] if not v["same"]]
    assert [(v["run"], v["where"]) for v in parted] == [
        ("single_grpo-s0", "step 2's sampled tokens or their log-probs differ (step 1 is equal)")]
    # Only the replays were written: the folder's own runs are as they were.
    assert sorted(p.name for p in (tmp_path / "bit-check").iterdir()) == [check["code"]]


def test_a_folder_without_fingerprints_says_there_is_nothing_to_compare(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"results": [{"row": "shared", "seed": 0}]}))
    with pytest.raises(ConfigError, match="nothing to compare bit for bit"):
        check_bits(tmp_path, 2)
    with pytest.raises(ConfigError, match="does not exist"):
        check_bits(tmp_path / "missing", 2)
