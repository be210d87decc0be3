"""The reward-hacking probe: every registered task's verifier rewards none of its hacks, the probe
does catch a lenient verifier, and the holes it found stay closed."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from teamrl.probes import CATALOGUES, count, probe_task
from teamrl.probes.core import Attempt, score_attempts
from teamrl.probes.split_hacks import split_calc_attempts
from teamrl.tasks.datafiles import default_data_dir
from teamrl.tasks.split_calc import OPERATIONS, SplitCalcConfig, gold_value
from teamrl.workflows.base import Outcome
from teamrl.workflows.math_team import MathWorkflow
from teamrl.config.tasks import TASKS
from teamrl.workflows.split_calc_team import SplitCalcWorkflow

SRC = Path(__file__).resolve().parents[2] / "src"


def test_every_registered_task_has_a_catalogue() -> None:
    # A task added to the registry without hacks would silently go unprobed. The built-in tasks are
    # read in a fresh interpreter: other tests (and the docs' command examples) register their own.
    listed = subprocess.run([sys.executable, "-c", "from teamrl.config.tasks import TASKS; print(' '.join(TASKS))"],
                            capture_output=True, text=True, check=True, env={"PYTHONPATH": str(SRC)}).stdout.split()
    assert sorted(listed) == sorted(CATALOGUES)
    assert set(CATALOGUES) <= set(TASKS)


@pytest.mark.parametrize("task", sorted(CATALOGUES))
def test_no_hack_is_rewarded(task: str) -> None:
    rows = probe_task(task, instances=2)
    table = count(rows)
    assert len(table) >= 8, f"{task}: only {len(table)} hack kinds were tried"
    assert all(tried >= 1 for _, _, tried, _ in table)
    assert [(r.kind, r.instance, r.why, r.response[:80]) for r in rows if r.rewarded] == []


# ----------------------------------------------------------------------------- the probe can fail

class LastNumberCalculator(SplitCalcWorkflow):
    """A deliberately lenient calculator verifier: it grades the last integer of the response."""

    def apply(self, agent: str, state: Any, response: str) -> Outcome:
        if agent != "calculator":
            return super().apply(agent, state, response)
        numbers = re.findall(r"-?\d+", response)
        right = bool(numbers) and int(numbers[-1]) == gold_value(state.item)
        state.answered, state.solved = True, right
        return Outcome(float(right), 0.0)


def test_a_lenient_verifier_is_caught() -> None:
    workflow = LastNumberCalculator(SplitCalcConfig())
    state = workflow.new_state("heldout", 0)
    rows = score_attempts("stub", workflow, 0, split_calc_attempts(workflow, copy.deepcopy(state)), state)
    caught = {r.kind for r in rows if r.rewarded}
    # "several numbers" ends in the gold; "several numbers, or" ends in the wrong one.
    assert {"several numbers", "number with a unit", "huge answer ending in the number"} <= caught
    assert "several numbers, or" not in caught
    assert all("success" in r.why and "team" in r.why for r in rows if r.rewarded)


def test_the_true_answer_played_the_same_way_is_rewarded() -> None:
    # The judge sees reward where there is some: the solution, scored like a hack, counts as rewarded.
    workflow = SplitCalcWorkflow(SplitCalcConfig())
    state = workflow.new_state("heldout", 3)
    formula, value = OPERATIONS[state.item[0]], gold_value(state.item)
    solution = Attempt("solution", (("analyst", formula), ("calculator", str(value))), ("team", "local"))
    [row] = score_attempts("split_calc", workflow, 3, [solution], state)
    assert row.rewarded and row.why == ["success", "team", "local"]


def test_probe_task_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="registered tasks"):
        probe_task("no_such_task")
    with pytest.raises(ValueError, match="instances must be >= 1"):
        probe_task("split_calc", instances=0)
    with pytest.raises(ValueError, match="at least the judged"):
        workflow = SplitCalcWorkflow(SplitCalcConfig())
        score_attempts("x", workflow, 0, [Attempt("empty", ())], workflow.new_state("heldout", 0))


# ----------------------------------------------------------------------------- holes found and fixed

def _reasoner(workflow: MathWorkflow, index: int, response: str) -> Outcome:
    return workflow.apply("reasoner", workflow.new_state("heldout", index), response)


def test_math_question_handed_back_is_not_correct() -> None:
    workflow = MathWorkflow("arithmetic:1,2")
    question = workflow.new_state("heldout", 1).problem.question  # "17+5-8", gold 14
    assert _reasoner(workflow, 1, f"\\boxed{{{question}}}").team == 0.0
    assert _reasoner(workflow, 1, f"Answer: {question}").team == 0.0
    assert _reasoner(workflow, 1, "\\boxed{7+7}").team == 0.0  # arithmetic answered with arithmetic
    gold = _reasoner(workflow, 1, f"\\boxed{{{workflow.new_state('heldout', 1).problem.answer}}}")
    assert (gold.team, gold.local) == (1.0, workflow.format_bonus)


@pytest.mark.parametrize("response", ["The answer is 15, 14.", "\\boxed{15, 14}", "\\boxed{x \\geq 14}",
                                      "The answer is 15 (１４).", "The answer is 15 (14)."])
def test_math_hedges_earn_no_format_bonus(response: str) -> None:
    outcome = _reasoner(MathWorkflow("arithmetic:1,2"), 1, response)  # gold 14
    assert (outcome.team, outcome.local) == (0.0, -0.1)


def test_math_hedges_on_real_problems_are_refused() -> None:
    try:
        default_data_dir()
    except FileNotFoundError:
        pytest.skip("benchmark datasets not found (../shared/datasets or $TEAMRL_DATA_DIR)")
    rows = probe_task("math", instances=2, task={"source": "gsm8k"})
    assert rows and [r.kind for r in rows if r.rewarded] == []


def test_sandbox_worker_keeps_no_hidden_tests_for_the_next_program() -> None:
    # One worker: the reader runs right after a ground-truth run of the same problem, in a child
    # forked from that worker. Before the fix the worker still held the last reply (the ground
    # truth's unit sources) and `gc.get_objects()` in the child found them: pass ratio 1.0.
    from teamrl.probes.code_hacks import HARVESTERS, _HARVEST_HEAD, _program
    from teamrl.workflows.code_parsing import parse_program
    from teamrl.workflows.code_runner import CodeRunner
    from teamrl.workflows.code_sources import code_problems

    problem = code_problems("procedural", 0).get("heldout", 0)
    reader, ok = parse_program(_program("f", "x", "return eval(_table.get(repr(x), 'None'))",
                                        _HARVEST_HEAD.format(name="f") + HARVESTERS["objects in memory"]), problem)
    assert ok
    runner = CodeRunner(workers=1)
    try:
        results = runner.ground_truth([(problem.reference_solution, problem), (reader, problem)])
    finally:
        runner.close()
    assert results[0][0] == 1.0  # the reference passes: the tests really ran on this worker
    assert results[1] == (0.0, "ok")  # it ran, and found nothing to answer from


def test_cli_probe_writes_json_and_exits_zero(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    run = subprocess.run([sys.executable, "-m", "teamrl.cli", "probe", "--task", "split_calc", "--task", "split_nav",
                          "--instances", "1", "--out", str(out)], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert report["tasks"] == ["split_calc", "split_nav"] and report["rewarded"] == 0
    assert report["tried"] == sum(row["tried"] for row in report["table"]) > 20
    assert "0 of" in run.stdout and "split_nav" in run.stdout


def test_cli_probe_unknown_task_is_a_clear_error() -> None:
    run = subprocess.run([sys.executable, "-m", "teamrl.cli", "probe", "--task", "nope"], capture_output=True,
                         text=True, timeout=60, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 2 and "unknown task(s) nope; registered tasks:" in run.stderr


@pytest.mark.parametrize("test, unit", [
    ("assert f(0) is not None or f(0) is None", False),  # HumanEval/55 (prime_fib): paid for mutants that crash on 0
    ("assert f(1) == 2 or f(1) != 2", False),
    ("assert f(1) or not f(1)", False),
    ("assert f(1) < 3 or f(1) >= 3", False),
    ("assert f(1) == 2 or f(1) == 3", True),  # a hedged test, but one that some programs fail
    ("assert f(1) == 2", True),
])
def test_an_assert_or_its_negation_is_no_unit(test: str, unit: bool) -> None:
    import ast

    from teamrl.workflows.code_parsing import counts_as_unit

    assert counts_as_unit(ast.parse(test).body[0], {"f"}) is unit


def test_run_probe_exits_one_and_names_a_rewarded_hack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import io

    from teamrl.probes.report import run_probe

    def with_solution(workflow: Any, state: Any) -> list[Attempt]:  # a "hack" that is the solution: must be caught
        formula, value = OPERATIONS[state.item[0]], gold_value(state.item)
        return [Attempt("the solution", (("analyst", formula), ("calculator", str(value))))]

    monkeypatch.setitem(CATALOGUES, "split_calc", with_solution)
    stream, out = io.StringIO(), tmp_path / "p.json"
    assert run_probe(["split_calc"], 2, out, stream) == 1
    assert "REWARDED split_calc/the solution" in stream.getvalue()
    assert json.loads(out.read_text())["rewarded"] == 2
