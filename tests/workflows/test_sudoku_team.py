"""Sudoku tool + plan workflow: prompts, rewards, simulation vs real steps, scripted demos."""

from __future__ import annotations

import string

import pytest

from teamrl.tasks.sudoku import SudokuConfig, instance
from teamrl.workflows.base import Workflow, apply_many
from teamrl.demos.planning import (
    PlanningSkill, TrustedRunner, demonstrations, row_blind_fill, scripted_success_rate)
from teamrl.workflows.program_runner import ProgramRunner
from teamrl.workflows.sudoku_team import TOOL_HELPERS, SudokuWorkflow, grid_line
from teamrl.workflows.tool_plan import ToolPlanState

# Held-out puzzle 0:  4... / 213. / 3..2 / 1.4.
SOLUTION = "4321 2134 3412 1243"
GARBAGE = ["", "   ", "\x00\x01", "}}}{{{", "```python\n", "```python\nwhile\n```", "[[[[", "42",
           "print(", "Sure! Here you go.", "\ud800", "```python\nprint('\ud800')\n```", "?" * 500,
           "12 34", "[[1, 2], [3, 4]]"]


class LenientRunner(TrustedRunner):
    """In-process like TrustedRunner, but a program that raises counts as not run (test garbage)."""

    def run(self, sources: list[str]) -> list[tuple[str, bool]]:
        results = []
        for source in sources:
            try:
                results += super().run([source])
            except Exception:  # noqa: BLE001 - garbage programs fail in every way
                results.append(("", False))
        return results


def workflow(**kwargs: object) -> SudokuWorkflow:
    return SudokuWorkflow(runner=LenientRunner(), **kwargs)  # type: ignore[arg-type]


def state_of(index: int = 0, **config: object) -> ToolPlanState:
    config_ = SudokuConfig(**config)  # type: ignore[arg-type]
    return ToolPlanState(instance("heldout", index, config_))


def test_follows_the_workflow_protocol_and_roles() -> None:
    team, single = workflow(), workflow(single_agent=True)
    assert isinstance(team, Workflow) and isinstance(single, Workflow)
    assert [a.name for a in team.agents] == ["tool", "plan"]
    assert [a.name for a in single.agents] == ["plan"]
    with pytest.raises(ValueError, match="unknown agent 'tool'"):
        single.apply("tool", state_of(), "print(solve(grid))")
    with pytest.raises(TypeError, match="SudokuConfig"):
        SudokuWorkflow(object(), runner=TrustedRunner())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_turns"):
        workflow(max_turns=0)


def test_compact_prompts_are_short_and_show_the_tool_to_the_plan() -> None:
    team = workflow()
    state = state_of()
    assert team.render("tool", state) == "tool\n4...\n213.\n3..2\n1.4.\n>"
    team.apply("tool", state, "print(solve(grid))")
    plan_prompt = team.render("plan", state)
    assert plan_prompt.endswith(f"code:print(solve(grid))\nout:{SOLUTION}\nsim:goal\n>")
    assert len(plan_prompt) < 150
    assert workflow(single_agent=True).render("plan", state) == "plan\n4...\n213.\n3..2\n1.4.\n>"


def test_chat_prompts_explain_the_roles() -> None:
    state = state_of()
    assert "solve(grid)" in workflow(prompt_style="chat").render("tool", state)
    assert "sim:" in workflow(prompt_style="chat").render("plan", state)
    single = workflow(prompt_style="chat", single_agent=True).render("plan", state)
    assert "tool agent" not in single and single.endswith("1.4.")


def test_tool_simulates_on_a_copy_and_scores_every_term() -> None:
    team = workflow()
    state = state_of()
    before = list(state.env.cells)
    solved = team.apply("tool", state, "```python\nprint(solve(grid))\n```")
    assert state.simulation == "goal" and solved.local == solved.terms["format"] == 0.1
    for term in ("step_cost", "progress", "goal"):
        assert solved.terms[term] != 0, term
    partial = team.apply("tool", state, "print(singles(grid))")
    assert state.simulation == "missed" and partial.terms["progress"] > 0 and "0" in state.output
    clash = team.apply("tool", state, "print([[1, 2, 3, 4]] * 4)")
    # An invalid proposal is not well formed (as for the plan): -format_bonus.
    assert state.simulation == "invalid" and clash.terms["invalid"] < 0 and clash.local < 0
    for program, label in [("print('hi')", "none"), ("1/0", "error"), ("}}}", "error"),
                           ("print(solve([[1, 1, 0, 0]] + [[0] * 4] * 3))", "none")]:
        outcome = team.apply("tool", state, program)
        assert state.simulation == label and outcome.terms == {"format": -0.1}, program
    assert state.env.cells == before and state.env.steps_taken == 0


def test_plan_steps_the_real_environment_and_scores_every_term() -> None:
    team = workflow()
    state = state_of()
    one = team.apply("plan", state, "4300 2130 3002 1040")  # one correct digit, 0 = leave blank
    assert state.env.grid[0] == [4, 3, 0, 0] and one.info["outcome"] == "missed"
    assert one.terms["step_cost"] < 0 and one.terms["progress"] > 0 and one.local > 0
    cleared = team.apply("plan", state, "4000 2130 3002 1040")  # clears the team's own entry
    assert state.env.grid[0] == [4, 0, 0, 0] and cleared.terms["progress"] < 0
    done = team.apply("plan", state, SOLUTION.replace(" ", "\n"))  # one row per line works too
    assert done.terms["goal"] > 0 and team.is_done(state) and team.success(state)
    fresh = state_of()
    clash = team.apply("plan", fresh, "4123 2134 3142 1243")
    assert clash.terms["invalid"] < 0 and clash.local < 0 and clash.info["outcome"] == "invalid"
    assert fresh.env.cells == list(fresh.env.puzzle)  # a clashing grid applies nothing


@pytest.mark.parametrize("agent", ["tool", "plan"])
def test_garbage_never_raises_tool_garbage_is_a_no_op_plan_garbage_forfeits(agent: str) -> None:
    team = workflow()
    for text in GARBAGE:
        state = state_of()
        outcome = team.apply(agent, state, text)
        # A plan that says nothing ends the episode with the invalid-move penalty (no safe harbour).
        expected_team = -state.env.config.invalid_penalty if agent == "plan" else 0.0
        assert outcome.local < 0 and outcome.team == expected_team, text
        assert team.is_done(state) == (agent == "plan") and not team.success(state)
        assert state.env.cells == list(state.env.puzzle) and state.env.steps_taken == 0


def test_follow_applies_the_tool_grid() -> None:
    team = workflow()
    state = state_of()
    team.apply("tool", state, "print(solve(grid))")
    followed = team.apply("plan", state, "follow")
    assert team.success(state) and followed.terms["goal"] > 0 and followed.local > 0
    partial = state_of()
    team.apply("tool", partial, "print(singles(grid))")
    team.apply("plan", partial, "follow")
    assert not team.success(partial)


def test_responses_after_the_episode_change_nothing() -> None:
    team = workflow()
    state = state_of()
    team.apply("plan", state, SOLUTION)
    for agent, text in (("tool", "print(solve(grid))"), ("plan", SOLUTION)):
        outcome = team.apply(agent, state, text)
        assert (outcome.team, outcome.local) == (0.0, 0.0) and outcome.info["episode_over"]


def test_helpers() -> None:
    namespace: dict = {}
    exec(TOOL_HELPERS, namespace)  # noqa: S102 - our own helper source
    solve, singles, candidates = namespace["solve"], namespace["singles"], namespace["candidates"]
    grid = [[4, 0, 0, 0], [2, 1, 3, 0], [3, 0, 0, 2], [1, 0, 4, 0]]
    assert grid_line(solve(grid)) == SOLUTION and grid[0] == [4, 0, 0, 0]
    assert candidates(grid, 1, 3) == [4] and candidates(grid, 0, 1) == [3]
    assert singles(grid)[1][3] == 4 and singles(grid)[0][2] == 0
    full = solve([[0] * 9 for _ in range(9)])
    assert all(sorted(row) == list(range(1, 10)) for row in full)
    assert all(sorted(col) == list(range(1, 10)) for col in zip(*full))
    assert solve([[5, 5] + [0] * 7] + [[0] * 9] * 8) is None


def test_nine_by_nine_works_end_to_end() -> None:
    team = workflow(task=SudokuConfig(size=9, heldout_instances=0))
    state = team.new_state("heldout", 0)
    team.apply("tool", state, "print(solve(grid))")
    assert state.simulation == "goal" and len(state.output.split()) == 9
    assert team.apply("plan", state, state.output).terms["goal"] > 0


def test_sandboxed_programs_batch_and_fail_safely() -> None:
    runner = ProgramRunner(workers=1)
    try:
        team = SudokuWorkflow(runner=runner)
        states = [state_of() for _ in range(4)]
        responses = ["print(solve(grid))", "while True: pass", "print(singles(grid))", "1/0"]
        outcomes = apply_many(team, "tool", states, responses)
        assert [s.simulation for s in states] == ["goal", "error", "missed", "error"]
        assert [o.local > 0 for o in outcomes] == [True, False, True, False]
    finally:
        runner.close()


def test_row_blind_fill_ignores_columns() -> None:
    env = state_of().env
    guess = row_blind_fill(env)
    assert guess == "4123 2134 3142 1243" != SOLUTION
    assert all(sorted(row) == list("1234") for row in guess.split())


def test_scripted_demonstrations_are_well_formed_and_imperfect() -> None:
    for single in (False, True):
        team = workflow(single_agent=single)
        stream = demonstrations(team, seed=3, skill=PlanningSkill())
        seen = set()
        for _ in range(60):
            agent, prompt, response = next(stream)
            seen.add(agent)
            assert prompt.startswith(agent + "\n") and prompt.endswith("\n>") and len(prompt) < 150
            assert set(prompt + response) <= set(string.printable) - set("\t\r\x0b\x0c")
            assert response and "\n" not in response
        assert seen == ({"plan"} if single else {"tool", "plan"})
    rate = scripted_success_rate(workflow(), PlanningSkill(), instances=30)
    assert 0.1 < rate < 0.95
    assert scripted_success_rate(workflow(), PlanningSkill(1.0, 1.0, 1.0), instances=10) == 1.0
