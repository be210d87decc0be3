"""Sokoban tool + plan workflow: prompts, rewards, simulation vs real steps, scripted demos."""

from __future__ import annotations

import copy

import string

import pytest

from teamrl.tasks.sokoban import Layout, SokobanConfig, SokobanEnv
from teamrl.workflows.base import Workflow, apply_many
from teamrl.demos.planning import (
    PlanningSkill, TrustedRunner, demonstrations, naive_push, scripted_success_rate)
from teamrl.workflows.program_runner import ProgramRunner
from teamrl.workflows.sokoban_team import SokobanWorkflow, parse_moves
from teamrl.workflows.tool_plan import ToolPlanState

ROOM = """
######
#@$.x#
#....#
#....#
#....#
######
"""
TWO_BOXES = """
######
#@$.x#
#.$..#
#...x#
#....#
######
"""
SOLVE = "print(solve(grid,(1,1),[(1,2)]))"
GARBAGE = ["", "   ", "\x00\x01", "}}}{{{", "```python\n", "```python\nwhile\n```", "[[[[", "42",
           "print(", "Sure! Here you go.", "\ud800", "```python\nprint('\ud800')\n```", "?" * 500]


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


def workflow(**kwargs: object) -> SokobanWorkflow:
    return SokobanWorkflow(runner=LenientRunner(), **kwargs)  # type: ignore[arg-type]


def state_of(text: str = ROOM) -> ToolPlanState:
    env = SokobanEnv(SokobanConfig())
    env.load(Layout.from_text(text))
    return ToolPlanState(env)


def test_follows_the_workflow_protocol_and_roles() -> None:
    team, single = workflow(), workflow(single_agent=True)
    assert isinstance(team, Workflow) and isinstance(single, Workflow)
    assert [a.name for a in team.agents] == ["tool", "plan"]
    assert [a.name for a in single.agents] == ["plan"]
    with pytest.raises(ValueError, match="unknown agent 'tool'"):
        single.apply("tool", state_of(), SOLVE)
    with pytest.raises(ValueError, match="prompt_style"):
        workflow(prompt_style="verbose")
    with pytest.raises(TypeError, match="SokobanConfig"):
        SokobanWorkflow(object(), runner=TrustedRunner())  # type: ignore[arg-type]


def test_compact_prompts_are_short_and_show_the_tool_to_the_plan() -> None:
    team = workflow()
    state = team.new_state("train", 0)
    tool_prompt = team.render("tool", state)
    assert tool_prompt.startswith("tool\n#") and tool_prompt.endswith("\n>")
    assert "player=(" in tool_prompt and "boxes=[(" in tool_prompt
    assert len(tool_prompt) < 150
    r, c = state.env.player_cell
    (br, bc), = state.env.box_cells
    team.apply("tool", state, f"print(solve(grid,({r},{c}),[({br},{bc})]))")
    plan_prompt = team.render("plan", state)
    assert "code:print(solve(" in plan_prompt and "\nsim:goal\n>" in plan_prompt
    assert len(plan_prompt) < 200
    assert "code:" not in workflow(single_agent=True).render("plan", state)


def test_chat_prompts_explain_the_roles() -> None:
    state = state_of()
    chat = workflow(prompt_style="chat")
    assert "solve(grid, player, boxes)" in chat.render("tool", state)
    assert "sim:" in chat.render("plan", state)
    single = workflow(prompt_style="chat", single_agent=True).render("plan", state)
    assert "tool agent" not in single and single.endswith("boxes=[(1,2)]")


def test_parse_moves() -> None:
    assert parse_moves("RRDL") == ["R", "R", "D", "L"]
    assert parse_moves("Moves: right, down") == ["R", "D"]
    assert parse_moves("no idea") is None and parse_moves("") is None


def test_tool_simulates_on_a_copy_and_scores_every_term() -> None:
    team = workflow()
    state = state_of()
    before = (state.env.player, state.env.boxes, state.env.steps_taken)
    solved = team.apply("tool", state, f"```python\n{SOLVE}\n```")
    assert (state.env.player, state.env.boxes, state.env.steps_taken) == before
    assert state.simulation == "goal" and state.output == "RR"
    assert solved.local == solved.terms["format"] == 0.1
    for term in ("step_cost", "progress", "goal"):
        assert solved.terms[term] != 0, term
    invalid = team.apply("tool", state, "print('L')")
    # An invalid proposal is not well formed (as for the plan): -format_bonus.
    assert state.simulation == "invalid" and invalid.terms["invalid"] < 0 and invalid.local < 0
    assert team.apply("tool", state, "print('D')").terms["progress"] == 0
    assert state.simulation == "missed"
    swapped = team.apply("tool", state, "print(solve(grid,(1,2),[(1,1)]))")
    assert state.simulation != "goal" and swapped.team < solved.team
    for program, label in [("print(1)", "none"), ("1/0", "error"), ("}}}", "error")]:
        outcome = team.apply("tool", state, program)
        assert state.simulation == label and outcome.local < 0 and outcome.terms == {"format": -0.1}
    assert (state.env.player, state.env.boxes, state.env.steps_taken) == before


def test_plan_steps_the_real_environment_and_scores_every_term() -> None:
    team = workflow()
    state = state_of()
    moved = team.apply("plan", state, "D")
    # A valid walk that pushes no box is well formed but no progress: no format bonus, so that going
    # nowhere never scores above zero.
    assert state.env.player_cell == (2, 1) and moved.terms["step_cost"] < 0 and moved.local == 0
    past = copy.deepcopy(state)
    back = team.apply("plan", state, "URR")  # pushes the box onto x; the episode ends there
    assert back.info["outcome"] == "goal" and back.terms["goal"] > 0 and back.terms["progress"] > 0
    assert team.is_done(state) and team.success(state)
    overrun = team.apply("plan", past, "URRL")  # the same, and a move past the goal: refused whole
    assert overrun.info["refused"] == "moves past the end" and overrun.team < 0 and overrun.local < 0
    assert team.is_done(past) and not team.success(past)
    invalid = team.apply("plan", state_of(), "L")
    assert invalid.terms["invalid"] < 0 and invalid.local < 0
    assert invalid.info["outcome"] == "invalid"


def test_tool_reads_the_named_state_and_a_swapped_call_solves_another_room() -> None:
    team = workflow()
    state = state_of()
    team.apply("tool", state, "print(solve(grid,player,boxes))")
    assert state.simulation == "goal" and state.output == "RR"
    team.apply("tool", state, "print(solve(grid,boxes[0],[player]))")  # the demos' systematic mistake
    assert state.simulation != "goal"
    two = state_of(TWO_BOXES)
    team.apply("tool", two, "print(player, boxes)")
    assert two.simulation == "none" and two.output == "(1, 1) [(1, 2), (2, 2)]"


def test_follow_executes_the_tool_proposal_and_forfeits_without_one() -> None:
    team = workflow()
    state = state_of()
    team.apply("tool", state, "print(solve(grid,player,boxes))")
    followed = team.apply("plan", state, " Follow")
    assert team.success(state) and followed.terms["goal"] > 0 and followed.local > 0
    state = state_of()
    team.apply("tool", state, "print(1)")  # no proposal this turn
    forfeit = team.apply("plan", state, "follow")
    assert forfeit.info["parsed"] is False and team.is_done(state) and forfeit.terms["invalid"] < 0
    single = workflow(single_agent=True)
    alone = state_of()
    unparsed = single.apply("plan", alone, "follow")  # no tool to follow: not a plan
    assert unparsed.info == {"parsed": False, "outcome": "invalid"} and single.is_done(alone)


def test_progress_can_be_negative() -> None:
    team = workflow()
    state = state_of("######\n#..$x#\n#...@#\n#....#\n#....#\n######")
    outcome = team.apply("plan", state, "UL")  # steps onto x, pushes the box away from it
    assert state.env.box_cells == [(1, 2)] and outcome.terms["progress"] < 0


@pytest.mark.parametrize("agent", ["tool", "plan"])
def test_garbage_never_raises_tool_garbage_is_a_no_op_plan_garbage_forfeits(agent: str) -> None:
    team = workflow()
    for text in GARBAGE:
        state = state_of()
        before = (state.env.player, state.env.boxes, state.env.steps_taken)
        outcome = team.apply(agent, state, text)
        # A plan that says nothing ends the episode with the invalid-move penalty (no safe harbour).
        expected_team = -state.env.config.invalid_penalty if agent == "plan" else 0.0
        assert outcome.local < 0 and outcome.team == expected_team, text
        assert team.is_done(state) == (agent == "plan") and not team.success(state)
        assert (state.env.player, state.env.boxes, state.env.steps_taken) == before


def test_responses_after_the_episode_change_nothing() -> None:
    team = workflow()
    state = state_of()
    team.apply("plan", state, "RR")
    assert team.is_done(state)
    for agent in ("tool", "plan"):
        outcome = team.apply(agent, state, SOLVE if agent == "tool" else "LL")
        assert (outcome.team, outcome.local) == (0.0, 0.0) and outcome.info["episode_over"]


def test_helper_solves_two_boxes_and_rejects_impossible_positions() -> None:
    team = workflow()
    state = state_of(TWO_BOXES)
    team.apply("tool", state, "print(solve(grid,(1,1),[(1,2),(2,2)]))")
    assert state.simulation == "goal"
    team.apply("tool", state, "print(solve(grid,(0,0),[(1,2),(2,2)]))")  # player in a wall
    assert state.simulation == "none"
    team.apply("tool", state, "print(solve(grid,(1,1),(1,2)))")  # one box for two targets
    assert state.simulation == "none"


def test_sandboxed_programs_batch_and_fail_safely() -> None:
    runner = ProgramRunner(workers=1)
    try:
        team = SokobanWorkflow(runner=runner)
        states = [state_of() for _ in range(5)]
        responses = [SOLVE, "while True: pass", "print('hello')", "1/0", SOLVE]
        outcomes = apply_many(team, "tool", states, responses)
        assert [s.simulation for s in states] == ["goal", "error", "none", "error", "goal"]
        assert [o.local > 0 for o in outcomes] == [True, False, False, False, True]
    finally:
        runner.close()


def test_naive_push_is_right_in_the_open_and_wrong_against_walls() -> None:
    assert naive_push(state_of().env) == "RR"
    env = state_of("######\n#..@.#\n#.$..#\n#.#.x#\n#....#\n######").env
    moves = naive_push(env)
    assert moves.startswith("LD")  # pushes the box down into the wall below it
    assert "invalid_at" in env.step(list(moves)).info


def test_scripted_demonstrations_are_well_formed_and_imperfect() -> None:
    for single in (False, True):
        team = workflow(single_agent=single)
        stream = demonstrations(team, seed=3, skill=PlanningSkill())
        seen = set()
        for _ in range(60):
            agent, prompt, response = next(stream)
            seen.add(agent)
            assert prompt.startswith(agent + "\n") and prompt.endswith("\n>")
            assert set(prompt + response) <= set(string.printable) - set("\t\r\x0b\x0c")
            assert response and "\n" not in response
        assert seen == ({"plan"} if single else {"tool", "plan"})
    rate = scripted_success_rate(workflow(), PlanningSkill(), instances=30)
    assert 0.1 < rate < 0.95
    assert scripted_success_rate(workflow(), PlanningSkill(1.0, 1.0, 1.0), instances=10) == 1.0


def test_demonstrations_are_reproducible() -> None:
    def take(n: int) -> list[tuple[str, str, str]]:
        stream = demonstrations(workflow(), 5, PlanningSkill())
        return [next(stream) for _ in range(n)]

    assert take(12) == take(12)
    with pytest.raises(ValueError, match="probability"):
        PlanningSkill(tool_correct=1.5)
