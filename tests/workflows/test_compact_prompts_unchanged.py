"""The compact prompts of Split-Calc, Split-Nav and calc-flows stay byte-identical (the tiny-model studies'
warm-ups and results depend on them): literal renders and a digest of many, both captured from the code
before chat prompts were added."""

from __future__ import annotations

import hashlib

from teamrl.tasks.split_calc import SplitCalcConfig
from teamrl.tasks.split_nav import SplitNavConfig
from teamrl.workflows.calc_flows import CALC_FLOWS, CalcFlowsConfig
from teamrl.workflows.split_calc_team import SplitCalcWorkflow
from teamrl.workflows.split_nav_team import SplitNavWorkflow

# Captured from commit 2ed9d8d (before chat prompts): held-out instance 0 of each task.
LITERAL = {
    "calc/analyst": "analyst\nop:sum\nf>",
    "calc/calculator": "calc\nx=5 y=9\nf:2*(x+y)\n=>",
    "calc/solo": "solo\nop:sum\nx=5 y=9\n=>",
    "nav/spotter": "spot\n.......\n.......\n..G....\n...S...\n.......\n.......\n.......\noffset>",
    "nav/walker": "walk\n....\n...S\n....\n...#\noffset=D2L1\nmoves>",
    "nav/solo": "solo\n....\n...S\n....\n...#\n.......\n.......\n..G....\n...S...\n.......\n.......\n.......\nmoves>",
    "flows/voting/aggregator": "agg\nq:sum x=5 y=9\n0:2*(3+4) 1:2*(3+4) 2:2*(3+4)\n>",
    "flows/evaluator_optimizer/evaluator": "ev\nq:sum x=5 y=9\na:2*(3+4)\n>",
    "flows/orchestrator_workers/worker_0": "w0\nq:sum x=5 y=9\ns:2*(3+4)\n>",
    "flows/debate/debater_2": "d2\nq:sum x=5 y=9\n>",
}
# sha256 of every render of `all_renders()` on the same code.
DIGEST = "3a5775154bc2ce011431006b84f2daa8be06fc665586083460625677fa694bdd"


def all_renders(instances: int = 12) -> dict[str, str]:
    """Every role's compact prompt on the first held-out instances, before and after its teammates answered
    (two rounds where a workflow has them)."""
    out: dict[str, str] = {}
    for index in range(instances):
        for single in (False, True):
            calc = SplitCalcWorkflow(SplitCalcConfig(), single_agent=single)
            state = calc.new_state("heldout", index)
            for agent in calc.agents:
                out[f"calc/{agent.name}/{index}"] = calc.render(agent.name, state)
                calc.apply(agent.name, state, "2*(x+y)")
            nav = SplitNavWorkflow(SplitNavConfig(), single_agent=single)
            state = nav.new_state("heldout", index)
            for agent in nav.agents:
                out[f"nav/{agent.name}/{index}"] = nav.render(agent.name, state)
                nav.apply(agent.name, state, "D2L1")
        for kind, build in CALC_FLOWS.items():
            flow = build(CalcFlowsConfig(), max_turns=2)
            state = flow.new_state("heldout", index)
            for turn in range(2):
                for agent in flow.agents:
                    out[f"flows/{kind}/{agent.name}/{index}/{turn}"] = flow.render(agent.name, state)
                    flow.apply(agent.name, state, "no 2*(3+4)" if agent.role == "evaluator" else "2*(3+4)")
    return out


def first_renders() -> dict[str, str]:
    """The renders of `LITERAL`'s keys (instance 0, teammates having answered 2*(x+y), D2L1 or 2*(3+4))."""
    renders = all_renders(1)
    keys = {"calc/analyst": "calc/analyst/0", "calc/calculator": "calc/calculator/0", "calc/solo": "calc/solo/0",
            "nav/spotter": "nav/spotter/0", "nav/walker": "nav/walker/0", "nav/solo": "nav/solo/0",
            "flows/voting/aggregator": "flows/voting/aggregator/0/0",
            "flows/evaluator_optimizer/evaluator": "flows/evaluator_optimizer/evaluator/0/0",
            "flows/orchestrator_workers/worker_0": "flows/orchestrator_workers/worker_0/0/0",
            "flows/debate/debater_2": "flows/debate/debater_2/0/0"}
    return {name: renders[key] for name, key in keys.items()}


def digest(renders: dict[str, str]) -> str:
    return hashlib.sha256("\x00".join(f"{k}\x01{v}" for k, v in sorted(renders.items())).encode()).hexdigest()


def test_compact_renders_are_unchanged():
    assert first_renders() == LITERAL


def test_compact_renders_digest_is_unchanged():
    assert digest(all_renders()) == DIGEST
