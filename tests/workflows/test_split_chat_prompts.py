"""Chat prompts of Split-Calc and Split-Nav: each role sees its own half of the instance and no more, the
stated answer form is what the verifiers read, and `workflow.prompt_style: chat` loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrl.config import load_config
from teamrl.tasks.split_calc import OPERATIONS, SplitCalcConfig
from teamrl.tasks.split_nav import SplitNavConfig, format_offset, make_env, offset_of
from teamrl.setup.team import build_workflow
from teamrl.workflows.chat_shots import few_shot, prompt_text
from teamrl.workflows.split_calc_team import SplitCalcState, SplitCalcWorkflow
from teamrl.workflows.split_nav_team import SplitNavState, SplitNavWorkflow, spelled_offset

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs"


def calc(operation: str, x: int, y: int, single: bool = False) -> tuple[SplitCalcWorkflow, SplitCalcState]:
    workflow = SplitCalcWorkflow(SplitCalcConfig(), single_agent=single, prompt_style="chat")
    return workflow, SplitCalcState((operation, x, y))


def nav(grid: tuple[str, ...], start: tuple[int, int], goal: tuple[int, int], single: bool = False
        ) -> tuple[SplitNavWorkflow, SplitNavState]:
    config = SplitNavConfig()
    layout = (grid, start, goal)
    return SplitNavWorkflow(config, single_agent=single, prompt_style="chat"), SplitNavState(layout, make_env(config, layout))


def test_few_shot_turns():
    messages = few_shot("Do it.", [("q1", "a1"), ("q2", "a2")], "q3")
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == "Do it.\n\nq1" and messages[-1]["content"] == "q3"
    assert prompt_text(messages).endswith("q3") and prompt_text("plain") == "plain"


def test_split_calc_analyst_sees_the_operation_and_no_operand():
    workflow, state = calc("twice sum", 7, 3)
    prompt = workflow.render("analyst", state)
    assert isinstance(prompt, list) and prompt[-1]["content"].endswith("Formula:")
    assert "twice sum" in prompt[-1]["content"]
    # The operands are the calculator's half: the analyst's prompt does not change with them.
    assert workflow.render("analyst", SplitCalcState(("twice sum", 1, 8))) == prompt
    assert "only the formula" in prompt[0]["content"]


def test_split_calc_calculator_sees_the_operands_and_formula_and_no_operation():
    workflow, state = calc("twice sum", 7, 3)
    workflow.apply("analyst", state, "2*(x+y)")
    prompt = workflow.render("calculator", state)
    last = prompt[-1]["content"]
    assert "x = 7, y = 3" in last and "2*(x+y)" in last and last.endswith("Result:")
    # The operation's name is the analyst's half: no operation's name anywhere in the calculator's prompt,
    # and the same prompt for another operation with the same formula committed.
    text = prompt_text(prompt)
    assert not any(name in text for name in OPERATIONS)
    other_workflow, other = calc("sum times y", 7, 3)
    other_workflow.apply("analyst", other, "2*(x+y)")
    assert other_workflow.render("calculator", other) == prompt


def test_split_calc_solo_sees_both_halves():
    workflow, state = calc("twice sum", 7, 3, single=True)
    last = workflow.render("solo", state)[-1]["content"]
    assert "twice sum" in last and "x = 7, y = 3" in last


def test_split_calc_answers_in_the_stated_form_are_rewarded():
    workflow, state = calc("twice sum", 7, 3)
    # The examples' answers are the forms the prompts ask for: a bare formula, bare arithmetic.
    assert workflow.render("analyst", state)[1]["content"] == "x-2*y"
    assert workflow.apply("analyst", state, "2*(x+y)").terms["team"] == 1.0
    assert workflow.render("calculator", state)[1]["content"] == "4-2*6"
    assert workflow.apply("calculator", state, "2*(7+3)").terms["team"] == 1.0 and workflow.success(state)
    workflow, state = calc("twice sum", 7, 3, single=True)
    assert workflow.apply("solo", state, "20").terms["team"] == 1.0


def test_split_calc_a_sentence_is_no_answer():
    workflow, state = calc("sum", 7, 3)
    assert workflow.apply("analyst", state, "The sum of x and y is x + y").terms["format"] < 0


GRID = ("....", ".#..", "....", "....")


def test_split_nav_spotter_sees_the_goal_and_no_wall():
    workflow, state = nav(GRID, (0, 0), (2, 1))
    prompt = workflow.render("spotter", state)
    last = prompt[-1]["content"]
    assert "G" in last and last.endswith("Offset:") and "#" not in prompt_text(prompt)
    # The walls are the walker's half: the spotter's prompt is the same on a grid without them.
    assert workflow.render("spotter", nav(("....",) * 4, (0, 0), (2, 1))[1]) == prompt


def test_split_nav_walker_sees_walls_and_report_and_no_goal():
    workflow, state = nav(GRID, (0, 0), (2, 1))
    workflow.apply("spotter", state, "D2R1")
    prompt = workflow.render("walker", state)
    last = prompt[-1]["content"]
    assert "#" in last and "S" in last and "D2R1" in last and "2 rows down and 1 column right" in last
    assert "G" not in last
    # The goal is the spotter's half: with the same report, the walker's prompt is the same wherever G is.
    other_workflow, other = nav(GRID, (0, 0), (3, 3))
    other_workflow.apply("spotter", other, "D2R1")
    assert other_workflow.render("walker", other) == prompt


def test_split_nav_walker_is_told_when_the_report_is_no_offset():
    workflow, state = nav(GRID, (0, 0), (2, 1))
    workflow.apply("spotter", state, "go down")
    assert "go down (not an offset)" in workflow.render("walker", state)[-1]["content"]


def test_split_nav_solo_sees_both_halves():
    workflow, state = nav(GRID, (0, 0), (2, 1), single=True)
    last = workflow.render("solo", state)[-1]["content"]
    assert "#" in last and "G" in last and last.endswith("Moves:")


def test_split_nav_answers_in_the_stated_form_are_rewarded():
    workflow, state = nav(GRID, (0, 0), (2, 1))
    examples = workflow.render("spotter", state)
    assert examples[1]["content"] == format_offset(offset_of((0, 1), (2, 3)))  # the example's bare offset
    assert workflow.apply("spotter", state, "D2R1").terms["team"] == 1.0
    assert workflow.render("walker", state)[1]["content"] == "RRDD"  # a bare walk
    assert workflow.apply("walker", state, "DDR").terms["team"] == 1.0 and workflow.success(state)


def test_spelled_offset():
    assert spelled_offset((2, -1)) == "2 rows down and 1 column left"
    assert spelled_offset((-3, 0)) == "3 rows up"


def test_the_examples_are_no_instance_of_the_task():
    """Example questions would hand a matching instance its answer."""
    workflow, state = calc("sum", 7, 3)
    for message in workflow.render("analyst", state)[:-1]:
        assert not any(f"Operation: {name} (" in message["content"] for name in OPERATIONS)


@pytest.mark.parametrize("config, agents", [("split_calc_team.yaml", ["analyst", "calculator"]),
                                            ("split_nav_team.yaml", ["spotter", "walker"])])
def test_config_with_chat_prompts_loads(config, agents):
    run = load_config(CONFIGS / config, ["workflow.prompt_style=chat"])
    workflow = build_workflow(run)
    assert [a.name for a in workflow.agents] == agents and workflow.prompt_style == "chat"
    single = build_workflow(load_config(CONFIGS / config, ["workflow.prompt_style=chat", "workflow.name=single"]))
    assert isinstance(single.render("solo", single.new_state("heldout", 0)), list)


@pytest.mark.parametrize("cls, task", [(SplitCalcWorkflow, SplitCalcConfig()), (SplitNavWorkflow, SplitNavConfig())])
def test_unknown_prompt_style_is_refused(cls, task):
    with pytest.raises(ValueError, match="prompt_style"):
        cls(task, prompt_style="verbose")


@pytest.mark.parametrize("module", ["teamrl.workflows.chat_shots", "teamrl.workflows.split_nav_team"])
def test_doctests(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
