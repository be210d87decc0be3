"""Chat prompts of the calc-flows workflows: every role sees the whole instance, answering roles see worked
examples first, answers in the stated form are parsed and rewarded, and the config loads with chat prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrl.config import load_config
from teamrl.tasks.split_calc import OPERATIONS
from teamrl.setup.team import build_workflow
from teamrl.workflows.calc_flows import CALC_FLOWS, CHAT_EXAMPLES, CalcDomain, CalcFlowsConfig, question
from teamrl.workflows.chat_shots import prompt_text

CONFIG = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs" / "calc_flows.yaml"
ANSWERS = {"aggregator": "\\boxed{0}", "evaluator": "\\boxed{Correct}", "orchestrator": "1. x+y\n2. x+y\n3. x+y"}


def chat_flow(kind: str):
    flow = CALC_FLOWS[kind](CalcFlowsConfig(), prompt_style="chat")
    return flow, flow.new_state("heldout", 0)


@pytest.mark.parametrize("kind", list(CALC_FLOWS))
def test_every_role_sees_the_whole_instance(kind):
    flow, state = chat_flow(kind)
    operation, x, y = state.problem
    for agent in flow.agents:
        prompt = flow.render(agent.name, state)
        last = prompt if isinstance(prompt, str) else prompt[-1]["content"]
        assert f"Compute the {operation} of x and y for x = {x} and y = {y}." in last, agent.name
        if agent.role in ("generator", "worker", "debater"):
            # Worked examples first, in the bare form the parser reads; no example is a task operation.
            assert isinstance(prompt, list) and [m["content"] for m in prompt[1:-1:2]] == [a for _, a in CHAT_EXAMPLES]
            assert "No words." in last
        flow.apply(agent.name, state, ANSWERS.get(agent.role, f"{x}+{y}"))
    assert all(problem[0] not in OPERATIONS for problem, _ in CHAT_EXAMPLES)


@pytest.mark.parametrize("kind", list(CALC_FLOWS))
def test_answers_in_the_stated_form_are_rewarded(kind):
    flow, state = chat_flow(kind)
    operation, x, y = state.problem
    assert operation == "sum"  # held-out instance 0: the right arithmetic is x+y
    for agent in flow.agents:
        outcome = flow.apply(agent.name, state, ANSWERS.get(agent.role, f"{x}+{y}"))
        if agent.role in ("generator", "worker", "debater", "synthesizer"):
            assert outcome.terms["correct"] == 1.0 and outcome.terms["format_ok"] == 1.0, agent.name
        if flow.is_done(state):
            break
    assert flow.success(state)


def test_a_sentence_is_no_answer():
    domain = CalcDomain(CalcFlowsConfig())
    assert domain.parse("The sum of x and y is 14", ("sum", 5, 9)).value is None
    assert domain.parse("5+9", ("sum", 5, 9)).value == "14"


def test_compact_prompts_show_no_examples():
    flow = CALC_FLOWS["voting"](CalcFlowsConfig())
    assert flow.render("generator_0", flow.new_state("heldout", 0)) == "g0\nq:sum x=5 y=9\n>"
    assert question(("sum", 5, 9)) == "sum x=5 y=9"


@pytest.mark.parametrize("kind", list(CALC_FLOWS))
def test_config_with_chat_prompts_loads(kind):
    run = load_config(CONFIG, ["workflow.prompt_style=chat", f"workflow.name={kind}"])
    flow = build_workflow(run)
    assert flow.prompt_style == "chat"
    text = prompt_text(flow.render(flow.agents[0].name, flow.new_state("heldout", 0)))
    assert "x = 5 and y = 9" in text


@pytest.mark.parametrize("kind, agent", [("voting", "aggregator"), ("evaluator_optimizer", "evaluator")])
def test_checking_roles_see_worked_examples_that_are_right(kind, agent):
    from teamrl.workflows.calc_flows import CHECKING_EXAMPLES
    from teamrl.workflows.flow_common import parse_choice, parse_verdict
    flow, state = chat_flow(kind)
    domain = flow.domain
    role = flow.check_agent(agent).role
    prompt = flow.render(agent, state)
    # two worked examples as earlier turns (question, reply), then the agent's own question
    assert isinstance(prompt, list) and len(prompt) == 5
    assert [m["content"] for m in prompt[1:-1:2]] == [reply for _, reply in CHECKING_EXAMPLES[role]]
    picked = set()
    for (problem, right), (texts, reply), shown in zip(CHAT_EXAMPLES, CHECKING_EXAMPLES[role], prompt[0:-1:2]):
        right_value = domain.parse(right, problem).value
        correct = [domain.parse(t, problem).value == right_value for t in texts]
        assert all(t in shown["content"] for t in texts) and f"x = {problem[1]} and y = {problem[2]}" in shown["content"]
        if role == "aggregator":
            choice = parse_choice(reply, len(texts))
            assert correct[choice] and correct.count(True) == 1
            picked.add(choice)
        else:
            verdict, _ = parse_verdict(reply)
            assert verdict == correct[0]
            picked.add(verdict)
    assert len(picked) == 2  # the examples do not teach one fixed index or verdict
