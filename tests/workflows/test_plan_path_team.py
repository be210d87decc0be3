import pytest

from teamrl.tasks.plan_path import PlanPathConfig
from teamrl.demos.plan_path import TrustedRunner
from teamrl.workflows.plan_path_team import PlanPathWorkflow, parse_moves
from teamrl.workflows.program_runner import ProgramRunner

CONFIG = PlanPathConfig(size=5, min_distance=2)


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


def test_chat_style_prompt_has_instructions():
    wf = PlanPathWorkflow(CONFIG, prompt_style="chat", runner=TrustedRunner())
    assert "bfs(grid, start, goal)" in wf.render("tool", wf.new_state("heldout", 0))


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
