"""The real-model studies (docs/study/real.md): their rows resolve to valid configs on the models they
name, their budgets fit the plan (a table under 6 h, --quick under 15 min), and --quick runs end to end
with a random tiny model substituted for every named model."""

import json
from pathlib import Path

import pytest

from teamrl.cli import main
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.study import real_budget
from teamrl.study.cells import planned_seconds
from teamrl.study.command import planned, whole_study_model
from teamrl.study.rows import GEMMA, REAL_STUDIES, SMOLLM2, select_rows, study
from teamrl.study.seed_run import row_config, transfer_overrides

TINY = ["train.steps=1", "train.batch_size=1", "algorithm.k=2", "rollout.max_new_tokens=4",
        "policy.warmup_sft_steps=2"]


def _config(name, key, seed=0, overrides=(), split="validation"):
    chosen = whole_study_model(study(name), list(overrides))
    row = next(r for r in select_rows(None, chosen) if r.key == key)
    return row_config(chosen, planned(chosen, False)[1], row.overrides, seed, Path("/tmp/unused"),
                      f"{key}-s{seed}", list(overrides), split=split)


@pytest.mark.parametrize("name", sorted(REAL_STUDIES))
def test_every_row_of_a_real_study_resolves_on_its_named_model(name):
    for row in select_rows(None, study(name)):
        config = _config(name, row.key)
        default = GEMMA if name in ("real_split_calc_gemma", "real_plan_path") else SMOLLM2
        expected = {"scale_tiny": "tiny-default", "scale_gemma": GEMMA}.get(row.key, default)
        assert config.policy.model == expected, row.key
        if expected == GEMMA:  # a base model: its answer ends at the blank line before the next worked example
            assert "\n\n" in config.rollout.stop, row.key
        assert config.train.steps == study(name).budget.steps and config.rollout.temperature == 0.5
        if row.key == "scale_tiny":  # the tiny default reads its warm-up's compact prompts, without LoRA
            assert config.workflow.prompt_style == "compact" and config.policy.lora is None
        else:
            assert config.workflow.prompt_style == "chat" and config.policy.lora.r == 16


def test_the_planning_table_shows_worked_examples_and_halves_the_held_out_grids():
    for split in ("validation", "test"):
        config = _config("real_plan_path", "shared", split=split)
        assert config.task["worked_examples"] and config.task["heldout_split"] == split
        assert config.task["heldout_instances"] == 256 and config.rollout.max_new_tokens == 40


def test_the_code_table_asks_the_harder_level_and_halves_its_held_out_problems():
    for split in ("validation", "test"):
        config = _config("real_code_team", "shared", split=split)
        assert config.task["source"] == "procedural:lists" and config.task["heldout_split"] == split
        assert config.rollout.max_new_tokens == 160
    assert _config("real_code_team", "single").workflow.name == "single"


def test_the_math_table_transfers_to_word_problems_on_their_test_split():
    chosen = study("real_math_team")
    assert [r.key for r in select_rows(["shared_transfer"], chosen)] == ["shared", "shared_transfer"]
    for key, regime in (("team_transfer", "per_role"), ("shared_transfer", "shared")):
        row = next(r for r in select_rows(None, chosen) if r.key == key)
        config = row_config(chosen, planned(chosen, False)[1], [*row.overrides, *transfer_overrides(chosen, row)],
                            100, Path("/tmp/unused"), f"{key}-s100", [], split="test")
        assert config.task["source"] == "arithmetic:4" and config.task["heldout_split"] == "test"
        # The shared row's checkpoint is tested in the regime it was trained in (the config's is per_role).
        assert config.workflow.name == "team" and config.regime == regime
    trained = _config("real_math_team", "shared", split="test")  # the rows that train stay on level 2
    assert trained.task["source"] == "arithmetic:2"


def test_a_model_override_replaces_every_model_the_study_names():
    assert _config("real_scale_calc", "scale_gemma", overrides=["policy.model=tiny-default"]).policy.model == "tiny-default"
    assert whole_study_model(study("real_hetero_calc"), ["policy.model=x"]).base_b == "x"
    assert study("real_hetero_calc").base_b == GEMMA and whole_study_model(study("split_calc"), ["policy.model=x"]).base_b == ""


def test_the_rows_of_a_real_study_are_its_own():
    assert [r.key for r in select_rows(None, study("real_split_calc"))] == [
        "single", "single_grpo", "team", "shared", "per_role", "swapped", "alone", "trajectory", "sft"]
    assert [r.key for r in select_rows(["swapped"], study("real_split_calc"))] == ["per_role", "swapped"]
    with pytest.raises(ValueError, match="study 'real_split_calc' has no row.s. team_transfer"):
        select_rows(["team_transfer"], study("real_split_calc"))
    assert all(r.kind != "scale" for r in select_rows(None, study("split_calc")))
    with pytest.raises(ValueError, match="study 'split_calc' has no scale axis for row.s. scale_gemma; drop them"):
        select_rows(["scale_gemma"], study("split_calc"))


@pytest.mark.parametrize("name", sorted(REAL_STUDIES))
def test_each_table_plans_under_six_hours_and_quick_under_fifteen_minutes(name):
    chosen = study(name)
    full = sum(planned_seconds(chosen).values()) * chosen.budget.seeds
    quick = sum(planned_seconds(planned(chosen, True)[0]).values())
    assert set(planned_seconds(chosen)) == set(chosen.rows)  # every row priced
    assert 0.5 * 3600 < full <= real_budget.HOURS_PER_TABLE * 3600, full / 3600
    assert quick <= real_budget.QUICK_MINUTES * 60, quick / 60
    assert chosen.budget.seeds >= 3


def test_quick_run_of_a_planned_study_needs_its_quick_budget():
    from dataclasses import replace

    chosen = replace(study("real_split_calc"), quick_budget=None)
    with pytest.raises(ValueError, match="plans a full budget but no quick_budget for --quick"):
        planned(chosen, True)
    assert planned(chosen, False)[1].seeds == tuple(range(chosen.budget.seeds))


def test_the_main_budget_arithmetic():
    b = REAL_STUDIES["real_split_calc"].budget
    # 12 steps x 4 instances x K 4 x 70/16 s = 840 s; evaluations at steps 0, 6 and 12 of 32 instances and
    # 64 test episodes: 160 x 100/64 s = 250 s; both scaled by the measured 0.27; one load 15 s
    assert b.evaluations() == 3 and b.train_s() == pytest.approx(15 + 0.27 * (840 + 250))


@pytest.fixture
def random_model(tmp_path, monkeypatch):
    monkeypatch.setenv("TEAMRL_CACHE", str(tmp_path / "cache"))
    tok = build_char_tokenizer()
    build_tiny_model(tok, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    return str(tmp_path / "m")


def test_quick_real_study_runs_end_to_end_on_a_substituted_model(random_model, tmp_path, capsys):
    out = tmp_path / "study"
    code = main(["study", "real_split_calc", "--quick", "--instances", "2", "--out", str(out),
                 f"policy.model={random_model}", *TINY])
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert [r["row"] for r in results["results"]] == list(study("real_split_calc").rows)
    assert all(r["digest"]["config"] and 0.0 <= r["test_success"] <= 1.0 for r in results["results"])
    assert results["protocol"]["seeds"] == [0]
    config = (out / "runs" / "shared-s0" / "config.yaml").read_text()
    assert f"model: {random_model}" in config and "prompt_style: chat" in config
    assert "AT-GRPO per-role" in (out / "table.md").read_text()
    shown = capsys.readouterr().out
    assert "9 cell(s) to run, 0 finished; ETA ~" in shown
    assert f"seed 0: base model {random_model} (no warm-up)" in shown and "warm-up seed" not in shown
    assert "same pretrained weights" in (out / "table.md").read_text()
    again = ["study", "real_split_calc", "--quick", "--instances", "2", "--out", str(out),
             f"policy.model={random_model}", *TINY, "--remaining"]
    assert main(again) == 0 and "every cell finished (9)" in capsys.readouterr().out


def test_quick_scale_study_records_the_sharing_gain_per_workflow(random_model, tmp_path, capsys):
    out = tmp_path / "scale"
    code = main(["study", "real_scale_calc", f"policy.model={random_model}", *TINY, "--quick", "--instances", "2",
                 "--out", str(out), "--rows", "scale_smollm2"])
    assert code == 0, capsys.readouterr().err
    record = json.loads((out / "results.json").read_text())["results"][0]
    assert set(record["cells"]) == {"voting", "evaluator_optimizer"}
    assert set(record["cells"]["voting"]) == {"untrained", "shared", "per_agent"}
    gain = record["sharing_gain"]["voting"]
    assert gain == record["cells"]["voting"]["shared"]["test_success"] - record["cells"]["voting"]["per_agent"]["test_success"]
    page = (out / "scale.md").read_text()
    assert f"| scale: SmolLM2-135M-Instruct | voting | + | {100 * gain:+.1f} | one seed:" in page
    assert "## scale: SmolLM2-135M-Instruct" in page and "| evaluator_optimizer | per_agent |" in page
    html = (out / "index.html").read_text()
    assert 'id="scale"' in html and f"| scale: SmolLM2-135M-Instruct | voting | + | {100 * gain:+.1f} | one seed:" in html


def test_base_strengths_load_named_checkpoints_through_their_converted_folder(random_model, monkeypatch):
    from teamrl.study import hetero_rows

    asked = []

    def resolve(model):  # stands in for the conversion of a shipped checkpoint (never loaded in tests)
        asked.append(model)
        return random_model

    monkeypatch.setattr(hetero_rows, "resolve_model_source", resolve)
    config = _config("real_hetero_calc", "hetero", overrides=["algorithm.k=2"])
    strengths = hetero_rows.base_strengths(config, {"A": SMOLLM2, "B": GEMMA}, instances=2, seed=0)
    assert asked == [SMOLLM2, GEMMA]
    assert set(strengths) == {"A", "B"} and set(strengths["A"]) == {"analyst", "calculator"}


def test_quick_hetero_study_names_its_pairs(random_model, tmp_path, capsys):
    out = tmp_path / "hetero"
    code = main(["study", "real_hetero_calc", f"policy.model={random_model}", *TINY, "--quick", "--instances", "2",
                 "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    rows = {r["row"]: r for r in results["results"]}
    assert set(rows) == {"per_role", "hetero", "homo_b"}
    assert rows["hetero"]["base_b"] == random_model  # the substitute replaced Gemma too: no warm-up, no download
    assert sorted(rows["hetero"]["assignment"].values()) == ["A", "B"]
    assert results["labels"]["hetero"] == "heterogeneous pair (SmolLM2 + Gemma-3-270M)"
    assert "| heterogeneous vs homogeneous pair of base B | hetero - homo_b |" in (out / "table.md").read_text()
