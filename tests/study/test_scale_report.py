"""The scale axis's page (`teamrl.study.scale_report`) on a hand-made results file with hand-computed numbers."""

import json

import pytest

from teamrl.study import flow_report, scale_report

ROW = "scale_x"
# (workflow, cell) -> seed -> (test best, test last); shared wins voting by 25 points on both seeds and
# loses the evaluator-optimizer by 10 and 20.
TESTS = {("voting", "shared"): {0: (0.50, 0.40), 1: (0.75, 0.75)},
         ("voting", "per_agent"): {0: (0.25, 0.30), 1: (0.50, 0.50)},
         ("evaluator_optimizer", "shared"): {0: (0.30, 0.30), 1: (0.20, 0.20)},
         ("evaluator_optimizer", "per_agent"): {0: (0.40, 0.40), 1: (0.40, 0.40)}}
ROLES = {"voting": {"shared": {"generator": 0.5, "aggregator": 0.5, "aggregator/offered": 0.6},
                    "per_agent": {"generator": 0.2, "aggregator": 0.25, "aggregator/offered": 0.4}},
         "evaluator_optimizer": {"shared": {"generator": 0.3, "evaluator": 0.7},
                                 "per_agent": {"generator": 0.4, "evaluator": 0.7}}}
SHARES = {"voting": {"generator": 0.7, "aggregator": 0.3}, "evaluator_optimizer": {"generator": 0.5, "evaluator": 0.5}}


def _metrics(workflow: str, cell: str) -> list[dict]:
    roles = SHARES[workflow]
    row = {"step": 1, "train/success": 0.5}
    for role, share in roles.items():
        row[f"diag/role/{role}/format_ok"] = 1.0
        if cell == "shared":
            row[f"diag/role/{role}/grad_share"] = share
    if workflow == "voting":
        row |= {f"diag/agent/generator_{i}/correct": 0.5 for i in range(3)}
    return [{"step": 0, "eval/success": 0.2}, row, {"step": 1, "eval/success": 0.3}]


def _results(tmp_path, points: int = 3) -> dict:
    records = []
    for seed in (0, 1):
        cells = {}
        for workflow in ("voting", "evaluator_optimizer"):
            cells[workflow] = {"untrained": {"test_success": 0.1, "roles": {}}}
            for cell in ("shared", "per_agent"):
                name = f"{ROW}-{workflow}-{cell}-s{seed}"
                folder = tmp_path / "runs" / name
                folder.mkdir(parents=True)
                (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _metrics(workflow, cell)))
                # one cliff: voting's shared run of seed 0 peaks at 0.6 and ends at 0.3
                curve = [[0, 0.2], [2, 0.6], [4, 0.3]] if (workflow, cell, seed) == ("voting", "shared", 0) else \
                    [[0, 0.2], [2, 0.3], [4, 0.3]]
                best, last = TESTS[(workflow, cell)][seed]
                cells[workflow][cell] = {"test_success": best, "test_final": last, "roles": ROLES[workflow][cell],
                                         "best_step": 2, "curve": curve[-points:],
                                         "run_dir": f"/gone/study/runs/{name}"}  # moved since: found under tmp_path
        gain = {w: cells[w]["shared"]["test_success"] - cells[w]["per_agent"]["test_success"] for w in cells}
        records.append({"row": ROW, "seed": seed, "test_success": 0.0, "cells": cells, "sharing_gain": gain})
    return {"rows": [ROW], "labels": {ROW: "scale: X"}, "results": records}


def test_gain_table_checks_the_predicted_sign_at_best_and_last_checkpoint(tmp_path):
    table = scale_report.gain_table(_results(tmp_path))
    # voting: +25 on both seeds, no spread (and no test size to floor it at); last checkpoint +10 and +25: mean
    # 17.5, std 10.61, t(1) 12.71
    assert ("| scale: X | voting | + | +25.0 [+25.0, +25.0] | not established (all 2 differences equal, +25.0 "
            "points: no spread measured, so no interval; n = 2 seeds) | +17.5 [-77.8, +112.8] | 2 | 2 of 2 |") in table
    # evaluator-optimizer: -10 and -20: mean -15, std 7.07, half-width 12.71 x 5 = 63.5
    assert ("| scale: X | evaluator_optimizer | - | -15.0 [-78.5, +48.5] | not established (interval spans 0; "
            "per-agent > shared on 2 of 2 seeds; n = 2 seeds) |") in table


def test_findings_table_pools_runs_and_reads_each_finding(tmp_path):
    results = _results(tmp_path)
    trained, _, _ = flow_report.collect(results, tmp_path)
    table = scale_report.findings_table(results, trained)
    # per_agent - shared over the four (workflow, seed) pairs: -25, -25, +10, +20 -> mean -5
    assert "| scale: X | -5.0 [" in table and "per-agent > shared on 2 of 4 run pairs" in table
    assert "| 0/4 vs 1/4 |" in table  # the one cliff is a shared run's
    assert "| 60% (2 of 4) |" in table  # voting's generators 70% of the shared gradient, the evaluator-optimizer's 50%
    # voting: right answer offered 60% vs 1 - 0.5^3 = 88% (shared); 40% vs 1 - 0.8^3 = 49% (per agent)
    assert "| 60% vs 88%; 40% vs 49% |" in table


def test_a_cliff_is_not_measured_on_two_evaluations(tmp_path):
    results = _results(tmp_path, points=2)
    trained, _, _ = flow_report.collect(results, tmp_path)
    assert "not measurable (2 validation evaluations a run)" in scale_report.findings_table(results, trained)
    assert any("cliffs" in line and "not measurable (2 validation evaluations a run)" in line
               for line in flow_report.findings(trained, ROW))


def test_write_finds_moved_run_folders_and_says_which_is_missing(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps(_results(tmp_path)))
    page = scale_report.write(tmp_path / "results.json").read_text()
    assert page.startswith("# Scale axis") and "## scale: X" in page and "| voting | shared |" in page
    (tmp_path / "runs" / f"{ROW}-voting-shared-s1" / "metrics.jsonl").unlink()
    (tmp_path / "runs" / f"{ROW}-voting-shared-s1").rmdir()
    with pytest.raises(FileNotFoundError, match=f"{ROW}-voting-shared-s1"):
        scale_report.write(tmp_path / "results.json")
