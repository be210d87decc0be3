import pytest

from teamrl.tasks.plan_path import PlanPathConfig
from teamrl.demos.plan_path import TrustedRunner
from teamrl.workflows.plan_path_team import EXAMPLE_GRIDS, PlanPathWorkflow, example_env, parse_moves
from teamrl.workflows.tool_plan import ToolPlanState
from teamrl.workflows.program_runner import ProgramRunner

CONFIG = PlanPathConfig(size=5, min_distance=2)
SHOWN = PlanPathConfig(size=5, min_distance=2, worked_examples=True)


def _team(runner=None):
    return PlanPathWorkflow(CONFIG, max_turns=3, runner=runner or TrustedRunner())


def test_tool_simulates_on_a_copy_and_plan_steps_the_real_env():
    wf = _team()
    state = wf.new_state("heldout", 0)
    start = state.env.position
    out = wf.apply("tool", state, "print(bfs(grid,start,goal))")
    assert state.env.position == start and state.simulation == "goal"
    assert out.team > 1.0 and out.local > 0
    assert "out:" + state.output in wf.render("plan", state)
    result = wf.apply("plan", state, "follow")
    assert state.env.success and result.terms["goal"] == CONFIG.goal_bonus and wf.is_done(state)


def test_swapped_arguments_are_simulated_as_a_failure():
    wf = _team()
    state = wf.new_state("heldout", 1)
    out = wf.apply("tool", state, "print(bfs(grid,goal,start))")
    assert state.simulation in ("invalid", "missed")
    assert out.team < 1.0


@pytest.mark.parametrize("garbage", ["", "print(", "import os; os._exit(3)", "\x00\x01", "1/0", "UUUUUUUUUUUUUUUU"])
def test_garbage_never_raises_in_the_sandbox(garbage):
    runner = ProgramRunner()
    try:
        wf = _team(runner)
        state = wf.new_state("heldout", 2)
        out = wf.apply("tool", state, garbage)
        assert out.local < 0 and state.simulation in ("error", "none")
        wf.apply("plan", state, garbage)
    finally:
        runner.close()


def test_a_plan_without_moves_forfeits_the_episode():
    # saying nothing must not be cheaper than trying (a single-agent run learned exactly that)
    wf = _team()
    state = wf.new_state("heldout", 3)
    out = wf.apply("plan", state, "no moves here?")
    assert out.local < 0 and out.team == -CONFIG.invalid_penalty
    assert wf.is_done(state) and not wf.success(state)


def test_single_agent_has_only_the_plan_role_and_no_tool_lines():
    wf = PlanPathWorkflow(CONFIG, single_agent=True, runner=TrustedRunner())
    assert [a.name for a in wf.agents] == ["plan"]
    assert "code:" not in wf.render("plan", wf.new_state("heldout", 0))


def test_chat_style_prompt_has_instructions_and_worked_examples():
    assert isinstance(PlanPathWorkflow(CONFIG, prompt_style="chat").render("tool", PlanPathWorkflow(CONFIG).new_state(
        "heldout", 0)), str)  # without task.worked_examples: the instruction and the grid, one message
    wf = PlanPathWorkflow(SHOWN, prompt_style="chat", runner=TrustedRunner())
    state = wf.new_state("heldout", 0)
    messages = wf.render("tool", state)
    assert "bfs(grid, start, goal)" in messages[0]["content"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[-1]["content"] == wf.observation(state.env)  # the question last, as the examples' questions
    assert [m["role"] for m in PlanPathWorkflow(SHOWN, single_agent=True, prompt_style="chat").render(
        "plan", state)] == ["user", "assistant", "user", "assistant", "user"]


@pytest.mark.parametrize("key", ["tool", "plan", "plan_single"])
def test_the_worked_examples_are_right_answers_to_their_own_states(key):
    """Each example, played by the workflow itself, does what the example says: the tool's program prints
    the path (simulated: goal), the wrong program's proposal is invalid, `follow` and the written moves
    reach the goal. The example grids are 4x4, so no instance of the 6x6 task is one of them."""
    wf = PlanPathWorkflow(SHOWN, single_agent=key == "plan_single", prompt_style="chat", runner=TrustedRunner())
    examples = wf.chat_examples(key)
    assert len(examples) == 2
    for layout, (question, answer) in zip(EXAMPLE_GRIDS, examples):
        assert len(layout[0]) == 4 and question.startswith(wf.observation(example_env(*layout)))
        state = ToolPlanState(example_env(*layout))
        if key == "tool":
            wf.apply("tool", state, answer)
            assert state.simulation == "goal" and state.output == state.env.shortest_path()
            continue
        if key == "plan":  # replay the tool turn the question shows
            program = question.split("code:", 1)[1].split("\nsim:", 1)[0]
            wf.apply("tool", state, f"```python\n{program}\n```")
            assert f"sim:{state.simulation}" in question and f"out:{state.output}" in question
        wf.apply("plan", state, answer)
        assert state.env.success


def test_parse_moves_tolerates_llm_phrasing():
    assert parse_moves("right, right, down") == ["R", "R", "D"]
    assert parse_moves("RRDD") == ["R", "R", "D", "D"]
    assert parse_moves("") == []


def test_plan_can_copy_the_proposal_too_and_follow_without_proposal_is_malformed():
    wf = _team()
    state = wf.new_state("heldout", 4)
    wf.apply("tool", state, "print(bfs(grid,start,goal))")
    assert wf.apply("plan", state, state.output).terms["goal"] == CONFIG.goal_bonus
    fresh = wf.new_state("heldout", 5)
    out = wf.apply("plan", fresh, "follow")
    assert out.local < 0 and not fresh.env.success
