"""`teamrl study workflows_calc`: the flows row's regimes, per-role accuracy, matrix, and --quick end to end."""

import json
from types import SimpleNamespace

import pytest

from teamrl.cli import main
from teamrl.config import load_config
from teamrl.setup.team import build_workflow
from teamrl.study import alert_scores, flow_report
from teamrl.study.flow_rows import distinct_regimes, matrix, role_accuracy
from teamrl.study.rows import select_rows, study


def workflow(name):
    return build_workflow(load_config("src/teamrl/configs/calc_flows.yaml", [f"workflow.name={name}"]))


def test_only_regimes_that_group_agents_differently():
    assert distinct_regimes(workflow("voting")) == ["shared", "per_role", "per_agent"]
    assert distinct_regimes(workflow("evaluator_optimizer")) == ["shared", "per_role"]  # one agent per role
    assert distinct_regimes(workflow("debate")) == ["shared", "per_agent"]  # one role
    assert distinct_regimes(workflow("orchestrator_workers")) == ["shared", "per_role", "per_agent"]


def test_role_accuracy_from_committed_turns():
    wf = workflow("voting")
    turn = lambda agent, **terms: {"agent": agent, "terms": terms}  # noqa: E731
    episodes = [SimpleNamespace(transcript=[turn("generator_0", correct=1.0), turn("generator_1", correct=0.0),
                                            turn("generator_2", correct=0.0),
                                            turn("aggregator", correct=0.0, any_correct=1.0)]),
                SimpleNamespace(transcript=[turn("generator_0", correct=1.0), turn("generator_1", correct=1.0),
                                            turn("generator_2", correct=0.0),
                                            turn("aggregator", correct=1.0, any_correct=1.0)])]
    assert role_accuracy(wf, episodes) == {"aggregator": 0.5, "aggregator/offered": 1.0, "generator": 0.5}
    ev = workflow("evaluator_optimizer")
    episode = SimpleNamespace(transcript=[turn("generator", correct=0.0, format_ok=1.0),
                                          turn("evaluator", verdict_correct=1.0, format_ok=1.0)])
    assert role_accuracy(ev, [episode]) == {"evaluator": 1.0, "generator": 0.0}


def test_matrix_summarizes_cells_over_seeds():
    cell = lambda s: {"test_success": s, "roles": {"generator": s}}  # noqa: E731
    results = {"results": [{"row": "flows", "seed": seed, "cells": {"voting": {"untrained": cell(u), "shared": cell(t)}}}
                           for seed, u, t in ((0, 0.2, 0.4), (1, 0.4, 0.6))]}
    table = matrix(results)
    assert "| voting | untrained | 30.0% ± 14.1 | 2 | generator 30% |" in table
    assert "| voting | shared | 50.0% ± 14.1 | 2 | generator 50% |" in table
    with pytest.raises(ValueError, match="no 'flows' row"):
        matrix({"results": []})


def test_flows_row_is_its_own_study():
    assert [r.key for r in select_rows(None, study("workflows_calc"))] == ["flows", "flows_hot"]
    assert "flows" not in [r.key for r in select_rows(None, study("split_calc"))]
    with pytest.raises(ValueError, match="flows"):
        select_rows(["flows"], study("split_calc"))


def test_quick_workflows_study_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TEAMRL_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "study"
    code = main(["study", "workflows_calc", "--quick", "--instances", "3", "--out", str(out),
                 "policy.warmup_sft_steps=2", "train.steps=2", "train.batch_size=2", "algorithm.k=2",
                 "train.eval_every=1", "--rows", "flows_hot"])
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    record, = results["results"]
    assert record["row"] == "flows_hot"
    cells = record["cells"]
    assert {w: list(c) for w, c in cells.items()} == {
        "voting": ["untrained", "shared", "per_role", "per_agent", "shared+role_balanced", "shared+damping",
                   "shared+kl"],
        "evaluator_optimizer": ["untrained", "shared", "per_role", "shared+role_balanced"],
        "orchestrator_workers": ["untrained", "shared", "per_role", "per_agent", "shared+role_balanced", "shared+kl"],
        "debate": ["untrained", "shared", "per_agent", "shared+damping", "shared+lr_matched"]}
    assert 0.0 <= cells["voting"]["shared"]["test_final"] <= 1.0  # the last checkpoint is scored too
    # The study's settings (diagnostics.level full) and the row's (10x lr) reach the runs; the user's
    # train.steps beats the study's 60; the mitigation's own switch is on.
    hot = (out / "runs" / "flows_hot-voting-shared-damping-s0" / "config.yaml").read_text()
    assert "level: full" in hot and "lr: 0.001" in hot and "steps: 2" in hot and "coherence_damping: 0.3" in hot
    control = (out / "runs" / "flows_hot-debate-shared-lr_matched-s0" / "config.yaml").read_text()
    assert "lr: 0.000988" in control  # the cell's own lr beats the row's
    report = flow_report.report(results, plots=tmp_path / "plots")
    assert "| voting | shared+kl |" in report and "| debate | damping |" in report  # matrix and mitigations
    assert (tmp_path / "plots" / "curves-flows_hot.png").is_file()
    scored = alert_scores.cases(results)
    assert len(scored) == 18 and {c.workflow for c in scored} == set(cells)
    assert record["test_success"] == cells["voting"]["shared"]["test_success"]
    assert set(cells["voting"]["per_agent"]["roles"]) == {"aggregator", "aggregator/offered", "generator"}
    assert cells["evaluator_optimizer"]["shared"]["curve"][0][0] == 0
    # Each workflow starts from its own warm-up; voting's is the runner's (the task's team workflow).
    bases = {w: c["untrained"]["base"] for w, c in cells.items()}
    assert len(set(bases.values())) == 4
    config = (out / "runs" / "flows_hot-debate-per_agent-s0" / "config.yaml").read_text()
    assert "name: debate" in config and "regime: per_agent" in config and "heldout_split: validation" in config
    assert "| debate | per_agent |" in matrix(results, "flows_hot")
    orchestra = (out / "runs" / "flows_hot-orchestrator_workers-shared-s0" / "config.yaml").read_text()
    assert "max_new_tokens: 24" in orchestra  # three formulas fit
    assert (out / "index.html").is_file()
    assert "| voting | shared+kl |" in (out / "flows.md").read_text()  # the study writes the matrix report
    # Alerts scored by replaying the real runs: tuned on one seed, scored on another (a copy of it here).
    twin = dict(record, seed=1)
    scored = alert_scores.evaluate({"results": [record, twin]}, tune_seeds={0})
    assert [(e["kind"], e["predicts"]) for e in scored] == [
        ("collapse", "cliff"), ("echo_chamber", "cliff"), ("echo_chamber", "errors coincide"),
        ("dominant_role", "adherence"), ("stalled_role", "no gain")]
    for entry in scored:  # the same runs on both sides: the tuned setting fits the held-out seed alike
        assert entry["held_out_tuned"].f1 == entry["tune_fit"].f1
    assert "| collapse (default) | cliff |" in alert_scores.table(scored)


@pytest.mark.parametrize("best_step, scored", [(4, ["best"]), (2, ["best", "final"])])
def test_train_cell_scores_the_last_checkpoint_only_when_it_is_not_the_best(monkeypatch, tmp_path, best_step, scored):
    from teamrl.study import flow_rows

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text(json.dumps({"initial_success": 0.0, "best_success": 0.5,
                                                      "best_step": best_step, "steps": 4}))
    asked = []

    def fake_test(seed_run, row, extra, model_path, checkpoint):
        asked.append(checkpoint.name)
        return {"test_success": {"best": 0.5, "final": 0.25}[checkpoint.name], "roles": {"generator": 0.5}}

    monkeypatch.setattr(flow_rows, "train", lambda config, model_path, progress: run_dir)
    monkeypatch.setattr(flow_rows, "test_cell", fake_test)
    monkeypatch.setattr(flow_rows, "curve", lambda folder: [(0, 0.0), (4, 0.5)])
    seed_run = SimpleNamespace(config=lambda row, extra, name: SimpleNamespace(output_dir=str(tmp_path), run_name="x"),
                               verbose=False, note_run=lambda folder, base: None)
    cell = flow_rows.train_cell(seed_run, SimpleNamespace(), (), "base", "x")
    assert asked == scored
    assert cell["test_success"] == 0.5 and cell["test_final"] == (0.5 if best_step == 4 else 0.25)
