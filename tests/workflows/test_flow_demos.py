"""Scripted flow agents: hand-checked working, learnable imperfection, tokenizer-safe prompts."""

from __future__ import annotations

import itertools
import random

import pytest

pytest.importorskip("math_verify")

from teamrl.policies.tiny_model import CHARACTERS  # noqa: E402
from teamrl.setup.tiny_default import WarmupRecipe, demo_batches  # noqa: E402
from teamrl.demos import driver as demo_driver  # noqa: E402
from teamrl.config.tasks import task_entry, task_settings  # noqa: E402
from teamrl.workflows.flow_kinds import FLOW_KINDS  # noqa: E402
from teamrl.demos.flows import (ArithmeticSkill, blind_spot, demonstrations, scripted_response,  # noqa: E402
                                          solve, steps, steps_hold, with_flow_demos)

TASK = {"name": "math", "source": "arithmetic:1,2"}


def build(kind, **kwargs):
    return task_entry("math").build(kind, task_settings(TASK), max_turns=kwargs.pop("max_turns", 2), **kwargs)


def test_working_is_hand_checked():
    assert steps("18-6+8") == ("18-6=12;12+8=20", 20)
    assert steps("18-6+8", right_to_left=True) == ("6+8=14;18-14=4", 4)
    assert steps("7*8+2", right_to_left=True) == ("8+2=10;7*10=70", 70)
    assert steps("3+4", slip=True) == ("3+4=8", 8)
    assert steps("Tom has 3 apples") is None
    assert steps_hold("18-6=12;12+8=20") and steps_hold("6+8=14;18-14=4")
    assert not steps_hold("18-6=12;12+8=21") and not steps_hold("20")
    assert [blind_spot("18-6+8", i) for i in range(6)] == [False, False, True, False, False, True]
    assert [blind_spot("3+4", i) for i in range(3)] == [False, True, False]
    assert [blind_spot("Tom has 3?", i) for i in range(3)] == [False, True, False]  # 10 characters


def test_a_solver_errs_systematically_on_its_blind_spot():
    rng = random.Random(0)
    skill = ArithmeticSkill(blind_wrong=1.0, base_wrong=0.0)
    assert solve("18-6+8", "20", 2, rng, skill) == "6+8=14;18-14=4"  # right to left changes the result
    assert solve("3+4+5", "12", 2, rng, skill) == "3+4=7;7+5=13"  # it does not: one too many
    assert solve("3+4", "7", 0, rng, skill) == "3+4=7"  # not its blind spot
    assert solve("18-6+8", "20", 0, rng, skill, strategy="r") == "6+8=14;18-14=4"
    assert solve("2+3+4", "9", 0, rng, ArithmeticSkill(blind_wrong=0.0), strategy="r") == "3+4=7;2+7=9"


@pytest.mark.parametrize("kind", sorted(FLOW_KINDS))
def test_demos_cover_every_agent_with_wellformed_tokenizer_safe_text(kind):
    wf = build(kind)
    triples = list(itertools.islice(demonstrations(wf, seed=0), 400))
    assert {agent for agent, _, _ in triples} == {a.name for a in wf.agents}
    allowed = set(CHARACTERS)
    for agent, prompt, response in triples:
        assert set(prompt) <= allowed and set(response) <= allowed and response
        assert wf.render(agent, wf.new_state("train", 1)).startswith(prompt.split("\n")[0] + "\n")
    # every scripted response has the form the workflow rewards as well formed
    outcomes = []
    apply = wf.apply
    wf.apply = lambda agent, state, response: outcomes.append(apply(agent, state, response)) or outcomes[-1]
    rng = random.Random(1)
    for i in range(30):
        for _ in demo_driver.play_episode(
                wf, wf.new_state("train", i), lambda a, st, r: scripted_response(wf, a, st, r, ArithmeticSkill()), rng):
            pass
    assert outcomes and all(o.terms["format_ok"] == 1.0 for o in outcomes)


def test_scripted_voting_team_is_mediocre_and_improvable():
    wf = build("voting")
    skill = ArithmeticSkill()
    team = demo_driver.scripted_success_rate(
        wf, lambda a, s, r: scripted_response(wf, a, s, r, skill), instances=200)
    majority = demo_driver.scripted_success_rate(
        wf, lambda a, s, r: scripted_response(wf, a, s, r, ArithmeticSkill(pick_majority=1.0)), instances=200)
    perfect = demo_driver.scripted_success_rate(
        wf, lambda a, s, r: scripted_response(wf, a, s, r, ArithmeticSkill(blind_wrong=0, base_wrong=0)),
        instances=200)
    assert 0.2 < team < 0.6  # a weak start...
    assert majority > team + 0.1  # ...that a better aggregator improves...
    assert perfect == 1.0  # ...and better generators fix


def test_demos_route_by_workflow_and_refuse_what_they_cannot_play():
    own = with_flow_demos(lambda wf, seed: iter([("x", "p", "r")]))
    assert next(own(build("team"), 0)) == ("x", "p", "r")
    assert next(own(build("voting"), 0))[0] == "generator_0"
    with pytest.raises(ValueError, match="no scripted demonstrations"):
        with_flow_demos(None)(build("team"), 0)
    with pytest.raises(ValueError, match="compact"):
        demonstrations(build("voting", prompt_style="chat"), 0)


def test_warmup_batches_cover_the_voting_team_and_the_single_agent():
    recipe = WarmupRecipe.for_task(TASK, 1, "voting", batch_size=4)
    batches = list(itertools.islice(demo_batches(recipe), 5))
    firsts = [batch[0][0].split("\n")[0] for batch in batches]
    assert firsts[:4] == ["g0", "g1", "g2", "agg"] and firsts[4] == "reasoner"
