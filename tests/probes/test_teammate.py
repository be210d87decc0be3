"""The malicious teammate: its adversaries answer plausibly and wrongly, and the wrapper substitutes them."""

from __future__ import annotations

import pytest

from teamrl.probes.teammate import WithAdversary, off_by_one, wrong_formula
from teamrl.tasks.split_calc import OPERATIONS, SplitCalcConfig, answer_value, evaluate_formula, gold_value, split_instances
from teamrl.workflows.split_calc_team import SplitCalcWorkflow


def test_the_wrong_formula_parses_and_is_wrong_on_every_held_out_instance() -> None:
    workflow = SplitCalcWorkflow(SplitCalcConfig())
    for index in range(len(split_instances(workflow.task, "heldout"))):
        state = workflow.new_state("heldout", index)
        operation, x, y = state.item
        formula = wrong_formula(workflow, state)
        value = evaluate_formula(formula, x, y)
        assert value is not None and value != gold_value(state.item), (state.item, formula)
        assert formula in OPERATIONS.values()  # plausible: a real operation's formula


def test_the_adversary_replaces_the_agent_and_the_team_fails() -> None:
    honest = SplitCalcWorkflow(SplitCalcConfig())
    hostile = WithAdversary(honest, "analyst", wrong_formula)
    state = hostile.new_state("heldout", 0)
    analyst = hostile.apply("analyst", state, OPERATIONS[state.item[0]])  # the policy's right answer is discarded
    assert analyst.team == 0.0 and analyst.terms["format"] == 0.0  # well formed, wrong
    _, x, y = state.item
    faithful = str(evaluate_formula(state.formula, x, y))
    calculator = hostile.apply("calculator", state, faithful)
    assert calculator.team == 0.0 and calculator.local > 0  # the calculator did its job; the team lost
    assert not hostile.success(state) and hostile.replaced == 1


def test_off_by_one_is_a_well_formed_wrong_number() -> None:
    workflow = SplitCalcWorkflow(SplitCalcConfig())
    state = workflow.new_state("heldout", 1)
    workflow.apply("analyst", state, OPERATIONS[state.item[0]])
    answer = off_by_one(workflow, state)
    assert answer_value(answer) == gold_value(state.item) + 1


def test_an_unknown_agent_is_refused() -> None:
    with pytest.raises(ValueError, match="agents are analyst, calculator"):
        WithAdversary(SplitCalcWorkflow(SplitCalcConfig()), "tester", wrong_formula)


def test_closing_the_wrapper_closes_the_wrapped_workflow() -> None:
    class Holding(SplitCalcWorkflow):  # stands for a workflow with sandbox workers to release
        closed = 0

        def close(self) -> None:
            self.closed += 1

    inner = Holding(SplitCalcConfig())
    WithAdversary(inner, "analyst", wrong_formula).close()
    assert inner.closed == 1


def test_hostile_tasks_register_a_workflow_with_the_adversary() -> None:
    # In a subprocess: registering tasks here would add them to this session's registry.
    import subprocess
    import sys
    from pathlib import Path

    code = ("from teamrl.config.tasks import task_settings, task_entry\n"
            "import teamrl.probes.hostile_tasks\n"
            "s = task_settings({'name': 'split_calc_hostile_analyst'})\n"
            "wf = task_entry('split_calc_hostile_analyst').build('team', s, max_turns=1)\n"
            "st = wf.new_state('heldout', 0)\n"
            "print(type(wf).__name__, wf.apply('analyst', st, 'x+y').team, wf.replaced)\n")
    src = str(Path(__file__).resolve().parents[2] / "src")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["WithAdversary", "0.0", "1"]
