"""`teamrl study --quick` end to end on a tiny budget, and the table written from a results file."""

import json

import pytest

from teamrl.cli import main
from teamrl.study.table import markdown


@pytest.fixture
def tiny_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEAMRL_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_quick_study_runs_every_row_end_to_end(tiny_cache, capsys):
    out = tiny_cache / "study"
    code = main(["study", "split_calc", "--quick", "--instances", "3", "--out", str(out),
                 "policy.warmup_sft_steps=2", "train.steps=1", "train.batch_size=2", "algorithm.k=2",
                 "train.eval_every=1"])
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    rows = {r["row"]: r for r in results["results"]}
    assert set(rows) == {"single", "single_grpo", "team", "shared", "per_role", "swapped", "alone", "trajectory",
                         "sft", "hetero", "homo_b", "team_transfer", "single_grpo_transfer", "shared_transfer"}
    assert all(0.0 <= r["test_success"] <= 1.0 for r in rows.values())
    assert rows["swapped"]["swapped"] == {"analyst": "calculator", "calculator": "analyst"}
    assert set(rows["alone"]["curves_alone"]) == {"analyst", "calculator"}
    assert rows["shared"]["curve"][0][0] == 0 and rows["team"]["base"]["k"] == 2
    # The best checkpoint was picked on validation; the reported number came from the test split.
    config = (out / "runs" / "shared-s0" / "config.yaml").read_text()
    assert "heldout_split: validation" in config
    assert "midway_eval_instances: 0" in config  # every evaluation scores the whole validation split
    table = (out / "table.md").read_text()
    assert "AT-GRPO per-role" in table and "co-trained per-role vs trained alone" in table
    assert (out / "index.html").is_file()
    assert rows["shared_transfer"]["variant"] == ["task.max_operand=15"]
    assert "transfer: AT-GRPO shared vs untrained team, unseen variant" in table
    # The transfer rows count each role's form and rightness over their test episodes; other rows do not.
    for key in ("team_transfer", "shared_transfer"):
        roles = rows[key]["roles"]
        assert set(roles) == {"analyst", "calculator"}
        for c in roles.values():
            assert c["turns"] == results["protocol"]["test_instances"] * results["protocol"]["test_samples"]
            assert c["right_formed"] <= min(c["right"], c["well_formed"]) and c["well_formed"] <= c["turns"]
    assert "roles" not in rows["shared"] and "| AT-GRPO shared, unseen variant | analyst |" in table


def test_seeds_run_as_parallel_jobs_into_one_results_file(tiny_cache, capsys):
    out = tiny_cache / "study"
    code = main(["study", "split_calc", "policy.warmup_sft_steps=2", "--quick", "--instances", "2", "--out", str(out),
                 "--seeds", "0", "1", "--jobs", "2", "--rows", "team"])
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert sorted((r["row"], r["seed"]) for r in results["results"]) == [("team", 0), ("team", 1)]
    assert results["protocol"]["seeds"] == [0, 1]
    assert (out / "job-0.log").is_file() and (out / "job-1.log").is_file()
    assert "| team (untrained) |" in (out / "table.md").read_text()


def test_transfer_rows_need_a_study_with_a_variant():
    from teamrl.study.rows import select_rows, study

    assert all(row.kind not in ("transfer", "bases") for row in select_rows(None, study("split_nav")))
    with pytest.raises(ValueError, match="has no transfer variant for row.s. shared_transfer; drop them"):
        select_rows(["shared_transfer"], study("split_nav"))
    with pytest.raises(ValueError, match="has no heterogeneous pair for row.s. hetero; drop them"):
        select_rows(["hetero"], study("split_nav"))
    with pytest.raises(ValueError, match="runs only the workflow matrix, not row.s. shared"):
        select_rows(["shared"], study("workflows_calc"))
    assert [r.key for r in select_rows(["shared_transfer"], study("split_calc"))] == ["shared", "shared_transfer"]


def test_scale_rows_without_a_study_name_the_study_that_lists_them():
    from teamrl.study.rows import select_rows

    with pytest.raises(ValueError, match="row.s. scale_tiny run only in the study that lists them .real_scale_calc."):
        select_rows(["scale_tiny"])


def test_unknown_study_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["study", "no_such_study"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'no_such_study'" in capsys.readouterr().err


def test_markdown_table_from_a_results_file():
    results = {"study": "demo", "protocol": {"test_instances": 10, "validation_instances": 10, "seeds": [0, 1]},
               "rows": ["team", "shared"], "labels": {"team": "team (untrained)", "shared": "AT-GRPO shared"},
               "results": [{"row": "team", "label": "team (untrained)", "seed": 0, "test_success": 0.2},
                           {"row": "team", "label": "team (untrained)", "seed": 1, "test_success": 0.4},
                           {"row": "shared", "label": "AT-GRPO shared", "seed": 0, "test_success": 0.5},
                           {"row": "shared", "label": "AT-GRPO shared", "seed": 1, "test_success": 0.5}],
               "seconds": 12.0}
    text = markdown(results)
    # team: mean 30%, std 14.1 points, t(1) = 12.706 -> half-width 12.706 * 0.141421 / sqrt(2) = 1.2706
    assert "| team (untrained) | 30.0% ± 14.1 [-97.1, 157.1] | 2 |" in text
    # shared - team: +0.3 and +0.1 -> mean +20 points, std 14.1, same half-width
    assert "| AT-GRPO shared vs untrained team | shared - team | +20.0 pts [-107.1, +147.1]; 2 wins" in text
    assert "| not established (interval spans 0; a > b on 2 of 2 seeds; n = 2 seeds x 10 test instances) |" in text


def test_a_study_folder_continues_and_refuses_another_protocol(tiny_cache, capsys):
    out = tiny_cache / "study"
    args = ["study", "split_nav", "--quick", "--instances", "2", "--out", str(out), "policy.warmup_sft_steps=2",
            "train.steps=1", "train.batch_size=2", "algorithm.k=2", "train.eval_every=1"]
    assert main([*args, "--rows", "team"]) == 0
    first = json.loads((out / "results.json").read_text())
    assert main([*args, "--rows", "team", "single"]) == 0  # team is kept, single is added
    second = json.loads((out / "results.json").read_text())
    assert second["results"][0] == first["results"][0]
    assert [r["row"] for r in second["results"]] == ["team", "single"]
    capsys.readouterr()
    assert main([*args[:4], "3", *args[5:], "--rows", "team"]) == 2  # --instances 3: another protocol
    assert "continue it with the same study, overrides and protocol" in capsys.readouterr().err


def test_markdown_lists_the_heterogeneous_assignment_and_the_transfer_variant():
    hetero = {"row": "hetero", "label": "heterogeneous pair", "seed": 0, "test_success": 0.5,
              "assignment": {"analyst": "A", "calculator": "B"},
              "strengths": {"A": {"analyst": 0.6, "calculator": 0.3}, "B": {"analyst": 0.55, "calculator": 0.64}}}
    moved = {"row": "shared_transfer", "label": "AT-GRPO shared, unseen variant", "seed": 0, "test_success": 0.2}
    results = {"study": "split_calc", "protocol": {"test_instances": 10, "validation_instances": 10, "seeds": [0]},
               "rows": ["hetero", "shared_transfer"],
               "labels": {"hetero": "heterogeneous pair", "shared_transfer": "AT-GRPO shared, unseen variant"},
               "results": [hetero, moved], "seconds": 1.0}
    text = markdown(results)
    assert "| seed | base A (analyst / calculator) | base B (analyst / calculator) | hetero row |" in text
    assert "| 0 | 60% / 30% | 55% / 64% | analyst A, calculator B |" in text
    assert "Unseen variant of the transfer rows: operands 1..15 (trained on 1..9) (task.max_operand=15)" in text


def test_a_cells_evaluations_run_at_the_studys_train_threads(tiny_cache, capsys, monkeypatch):
    """An untrained row is evaluation only, and a trained row's test scoring comes after its training: both
    run at train.threads, not at torch's default of every core (two study processes on two cores would put
    two OpenMP teams on each core). Afterwards torch has the count it had before."""
    import torch

    from teamrl.study import seed_run

    seen = []
    real = seed_run.sampled_outcomes
    monkeypatch.setattr(seed_run, "sampled_outcomes", lambda *a, **k: seen.append(torch.get_num_threads()) or real(*a, **k))
    torch.set_num_threads(2)
    try:
        code = main(["study", "split_calc", "policy.warmup_sft_steps=2", "train.threads=1", "train.steps=1",
                     "train.batch_size=2", "algorithm.k=2", "--quick", "--instances", "2", "--out",
                     str(tiny_cache / "study"), "--rows", "team", "shared"])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
        # the untrained row is silent no more: each scoring pass prints a line while the cell runs
        log = printed.out + printed.err
        for line in ("seed 0 team: held-out scoring: validation, sampled, pass 2/2: success",
                     "seed 0 team: held-out scoring: validation, greedy, pass 1/1: success",
                     "seed 0 shared: held-out scoring: test, pass 1/1: success"):
            assert line in log, log
    finally:
        torch.set_num_threads(1)


def test_a_subset_of_seeds_gets_its_own_table(tmp_path, capsys):
    """`python -m teamrl.study.table results.json --seeds ...` prints the table of those seeds' cells alone
    (the seeds added after a decision, say) and leaves table.md as it is; seeds the file lacks are refused."""
    from teamrl.study.table import main as table_main

    records = [{"row": row, "label": row, "seed": seed, "test_success": value, "seconds": 10.0 + seed}
               for row, values in (("team", (0.2, 0.4, 0.3)), ("shared", (0.5, 0.5, 0.9))) for seed, value in enumerate(values)]
    results = {"study": "demo", "protocol": {"test_instances": 10, "validation_instances": 10, "seeds": [0, 1, 2]},
               "rows": ["team", "shared"], "labels": {"team": "team (untrained)", "shared": "AT-GRPO shared"},
               "results": records, "seconds": 3.0}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    table_main([str(path), "--seeds", "1", "2"])
    printed = capsys.readouterr().out
    assert "| team (untrained) | 35.0% ± 7.1" in printed and "over seeds 1, 2;" in printed
    assert "| AT-GRPO shared vs untrained team | shared - team | +35.0 pts" in printed  # +0.1 and +0.6
    assert "Wall time: 46 s in the rows" in printed  # seeds 1 and 2 of both rows (2 x (11 + 12)), not the total
    assert not (tmp_path / "table.md").exists()
    with pytest.raises(SystemExit):
        table_main([str(path), "--seeds", "5"])
    assert "no cell of seeds [5] in demo's results; its seeds: [0, 1, 2]" in capsys.readouterr().err
