"""The heterogeneous-team rows: per-role accuracy against a correct scripted team, the assignment by
strengths, the config overrides, and the rows in a --quick study on a tiny budget."""

import doctest
import json
from types import SimpleNamespace

import pytest
import yaml

from teamrl.cli import main
from teamrl.config import ConfigError, load_config
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.study import hetero_rows
from teamrl.study.hetero_rows import bases_overrides, hetero_assignment, oracle_for, role_accuracy
from teamrl.study.rows import CONFIGS
from teamrl.tasks.split_calc import OPERATIONS, SplitCalcConfig, gold_value
from teamrl.workflows.split_calc_team import SplitCalcWorkflow

WORKFLOW = SplitCalcWorkflow(SplitCalcConfig())


class Scripted:
    """A stand-in policy whose 'ids' are the prompt text itself, so the fake sampler can answer per prompt."""

    def encode_prompt(self, text):
        return text


def fake_sampler(answer):
    """A `sample` stand-in: for each prompt, `samples` generations with the text answer(prompt, k)."""
    def draw(policy, prompts, samples, params, generator):
        return [[SimpleNamespace(text=answer(p, k)) for k in range(samples)] for p in prompts]
    return draw


def test_analyst_accuracy_counts_formulas_right_on_every_operand_pair(monkeypatch):
    seen = []

    def answer(prompt, k):  # the right formula for samples 0 and 1, x and y swapped for 2 and 3
        seen.append(prompt)
        gold = OPERATIONS[prompt.split("op:")[1].split("\n")[0]]
        return gold if k < 2 else gold.translate(str.maketrans("xy", "yx"))

    monkeypatch.setattr(hetero_rows, "sample", fake_sampler(answer))
    acc = role_accuracy(WORKFLOW, Scripted(), "analyst", oracle_for("split_calc", WORKFLOW), 6, SamplingParams(), 4, 0)
    # Swapping x and y keeps sum, product and twice sum right, and breaks the five others.
    ops = [WORKFLOW.new_state("heldout", i).item[0] for i in range(6)]
    symmetric = sum(op in ("sum", "product", "twice sum") for op in ops)
    assert acc == pytest.approx((6 * 2 + symmetric * 2) / 24)
    assert len(seen) == 24 and all(p.startswith("analyst\n") for p in seen)  # 6 prompts x 4 samples


def test_calculator_accuracy_is_measured_behind_a_correct_analyst(monkeypatch):
    prompts = []

    def answer(prompt, k):  # sample 0 right, sample 1 off by one
        prompts.append(prompt)
        index = (len(prompts) - 1) // 2  # two calls (k = 0, 1) per prompt, in instance order
        return str(gold_value(items[index]) + k)

    items = [WORKFLOW.new_state("heldout", i).item for i in range(5)]
    monkeypatch.setattr(hetero_rows, "sample", fake_sampler(answer))
    acc = role_accuracy(WORKFLOW, Scripted(), "calculator", oracle_for("split_calc", WORKFLOW), 5, SamplingParams(), 2, 0)
    assert acc == pytest.approx(0.5)
    for prompt, (op, x, y) in zip(prompts[::2], items):
        assert prompt == f"calc\nx={x} y={y}\nf:{OPERATIONS[op]}\n=>"  # the oracle analyst's formula


def test_unknown_agent_and_task_without_oracle_fail_clearly():
    with pytest.raises(ValueError, match="agent 'planner' is not in the workflow"):
        role_accuracy(WORKFLOW, Scripted(), "planner", oracle_for("split_calc", WORKFLOW), 1, SamplingParams(), 1, 0)
    with pytest.raises(ConfigError, match="tasks with one: split_calc"):
        oracle_for("plan_path", WORKFLOW)


def test_assignment_puts_b_where_its_margin_is_largest():
    a = {"analyst": 0.8, "calculator": 0.5}
    assert hetero_assignment({"A": a, "B": {"analyst": 0.6, "calculator": 0.7}}) == {
        "analyst": "A", "calculator": "B"}
    # B weaker on both roles: still mixed, B where it loses least (analyst: -0.1 vs calculator: -0.3).
    assert hetero_assignment({"A": a, "B": {"analyst": 0.7, "calculator": 0.2}}) == {
        "analyst": "B", "calculator": "A"}
    with pytest.raises(ValueError, match="at least two roles"):
        hetero_assignment({"A": {"solo": 0.5}, "B": {"solo": 0.6}})


def test_overrides_give_each_role_its_base(tmp_path):
    paths = {"A": str(tmp_path / "llama"), "B": str(tmp_path / "qwen2")}
    config = load_config(CONFIGS / "split_calc_team.yaml", list(bases_overrides({"analyst": "A", "calculator": "B"},
                                                                                  paths)))
    assert config.policy_config("analyst").model == paths["A"]
    assert config.policy_config("calculator").model == paths["B"]
    assert config.roles == {"analyst": "analyst", "calculator": "calculator"}


def test_hetero_rows_in_a_quick_study(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TEAMRL_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "study"
    code = main(["study", "split_calc", "--quick", "--instances", "3", "--out", str(out), "policy.warmup_sft_steps=2",
                 "train.steps=1", "train.batch_size=2", "algorithm.k=2", "train.eval_every=1",
                 "--rows", "per_role", "hetero", "homo_b"])
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    rows = {r["row"]: r for r in results["results"]}
    assert set(rows) == {"per_role", "hetero", "homo_b"}
    hetero, homo_b = rows["hetero"], rows["homo_b"]
    assert sorted(hetero["assignment"].values()) == ["A", "B"] and set(homo_b["assignment"].values()) == {"B"}
    strengths = hetero["strengths"]
    assert set(strengths) == {"A", "B"} and all(0.0 <= v <= 1.0 for s in strengths.values() for v in s.values())
    assert hetero["assignment"] == hetero_assignment(strengths)
    assert homo_b["strengths"] == strengths  # measured once per seed, shared by both rows
    assert hetero["bases_seconds"] > 0 and homo_b["bases_seconds"] == 0  # B warmed up in the first row only
    # The trained checkpoint holds one model per role, of the base it was assigned.
    for key in ("hetero", "homo_b"):
        best = out / "runs" / f"{key}-s0" / "checkpoints" / "best"
        for role, base in rows[key]["assignment"].items():
            arch = json.loads((best / role / "config.json").read_text())["architectures"]
            assert arch == (["Qwen2ForCausalLM"] if base == "B" else ["LlamaForCausalLM"])
        assert 0.0 <= rows[key]["test_success"] <= 1.0
    config = yaml.safe_load((out / "runs" / "hetero-s0" / "config.yaml").read_text())
    assert config["policies"]["calculator"]["model"] != config["policies"]["analyst"]["model"]
    # B was warmed up with the seed's warm-up seed, for 1.6 times A's steps (2 -> 3).
    recipe = json.loads((tmp_path / "cache" / hetero["base_b"].rsplit("/", 1)[1] / "warmup.json").read_text())["recipe"]
    assert (recipe["seed"], recipe["steps"]) == (100, 3)
    table = (out / "table.md").read_text()
    assert "heterogeneous vs homogeneous pair of base A" in table and "hetero - homo_b" in table


def test_doctests_hold():
    result = doctest.testmod(hetero_rows)
    assert result.attempted > 0 and result.failed == 0


def test_a_named_base_without_a_chat_template_stops_its_roles_at_a_blank_line(tmp_path, monkeypatch):
    from teamrl.study import hetero_rows

    templates = {"smollm2": "{{ messages }}", "gemma": None}  # what each base's tokenizer ships
    monkeypatch.setattr(hetero_rows, "resolve_model_source", lambda path: path)
    monkeypatch.setattr(hetero_rows, "load_tokenizer",
                        lambda name, path: type("Tokenizer", (), {"chat_template": templates[path]})())
    paths = {"A": "smollm2", "B": "gemma"}
    stops = hetero_rows.base_stops(paths, named={"A", "B"})
    assert stops == {"A": (), "B": ("\n\n",)}
    assert hetero_rows.base_stops(paths, named=set()) == {"A": (), "B": ()}  # the tiny study's bases: untouched
    local = {"A": str(tmp_path / "llama"), "B": str(tmp_path / "qwen2")}
    config = load_config(CONFIGS / "split_calc_team.yaml",
                         list(bases_overrides({"analyst": "A", "calculator": "B"}, local, stops)))
    assert config.rollout.for_agent("calculator", "calculator").stop == ["\n\n"]
    assert config.rollout.for_agent("analyst", "analyst").stop == []
