"""calc_flows: the flow workflows on Split-Calc content: every reward term, adversarial answers, demos."""

import random

import pytest

from teamrl.config import load_config
from teamrl.demos.calc_flows import FlowSkill, composition, demonstrations, respond
from teamrl.tasks.split_calc import gold_value
from teamrl.setup.team import build_workflow
from teamrl.workflows.calc_flows import CalcDomain, CalcFlowsConfig, parse_answer
from teamrl.config.tasks import task_entry

CONFIG = "src/teamrl/configs/calc_flows.yaml"
ITEM = ("twice sum", 7, 3)  # 2*(7+3) = 20
HACKS = ["20 21", "20,21", "20 or 21", "twenty", "", "   ", "2*(x+y)", "x", "20\n21", "1" * 30,
         "\\boxed{20}", "20=20", "(20", "20)", "--20", "2**10", "20;", "answer: 20"]


def workflow(name, **overrides):
    config = load_config(CONFIG, [f"workflow.name={name}", *(f"{k}={v}" for k, v in overrides.items())])
    return build_workflow(config)


def state_on(wf, item=ITEM):
    state = wf.new_state("train", 0)
    state.problem = item
    return state


def test_answer_value_is_computed_and_one_value_only():
    assert parse_answer("2*(7+3)").value == "20" and parse_answer(" 20 ").value == "20"
    assert parse_answer("-4").value == "-4" and parse_answer("7-11").value == "-4"
    for hack in HACKS:
        answer = parse_answer(hack)
        assert answer.value is None and not answer.well_formed, hack


def test_domain_grades_by_value_and_compares_values():
    domain = CalcDomain(CalcFlowsConfig())
    answers = [parse_answer(t) for t in ("2*(7+3)", "20", "2*(3+7)", "21", "7+3")]
    assert domain.grade([ITEM] * 5, answers) == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert domain.same(answers[0], answers[1]) and not domain.same(answers[0], answers[3])
    assert not domain.same(parse_answer("x"), parse_answer("y"))  # two missing answers do not agree
    assert domain.question(ITEM, "compact") == "twice sum x=7 y=3"
    assert answers[0].shown == "2*(7+3)"  # the others see the expression, not the value


def test_voting_terms_generator_and_aggregator():
    wf = workflow("voting")
    state = state_on(wf)
    right, = wf.apply_many("generator_0", [state], ["2*(7+3)"])
    assert (right.team, right.local, right.terms["correct"], right.terms["format_ok"]) == (1.0, 0.1, 1.0, 1.0)
    wrong, = wf.apply_many("generator_1", [state], ["7+3"])
    assert (wrong.team, wrong.local, wrong.terms["correct"]) == (0.0, 0.1, 0.0)
    bad, = wf.apply_many("generator_2", [state], ["20 21"])
    assert (bad.team, bad.local, bad.terms["format_ok"]) == (0.0, -0.1, 0.0)
    assert "0:2*(7+3) 1:7+3 2:20 21" in wf.render("aggregator", state)
    for pick, team in (("0", 1.0), ("1", 0.0), ("2", 0.0)):
        trial = state_on(wf)
        trial.answers, trial.scores = dict(state.answers), dict(state.scores)
        outcome = wf.apply("aggregator", trial, pick)
        assert (outcome.team, outcome.local, outcome.terms["any_correct"]) == (team, 0.1, 1.0), pick
        assert wf.success(trial) == (team == 1.0)


@pytest.mark.parametrize("hack", ["0 1", "\\boxed{0}\\boxed{1}", "3", "", "all", "0/1", "0,1,2", "-1"])
def test_aggregator_hedges_score_nothing(hack):
    wf = workflow("voting")
    state = state_on(wf)
    for g, text in zip(wf.generators, ["20", "20", "2*(7+3)"]):
        wf.apply(g, state, text)
    outcome = wf.apply("aggregator", state, hack)
    assert (outcome.team, outcome.local) == (0.0, -0.1) and not wf.success(state)


def test_evaluator_optimizer_terms_and_revision():
    wf = workflow("evaluator_optimizer")
    assert wf.max_turns == 2
    state = state_on(wf)
    wf.apply("generator", state, "7+3")
    verdict = wf.apply("evaluator", state, "no")  # right: the answer is wrong
    assert (verdict.team, verdict.local, verdict.terms["verdict_correct"]) == (1.0, 0.1, 1.0)
    assert not wf.is_done(state) and "was:7+3 no" in wf.render("generator", state)
    wf.apply("generator", state, "2*(7+3)")
    verdict = wf.apply("evaluator", state, "no")  # wrong: the answer is right
    assert (verdict.team, verdict.terms["verdict_correct"]) == (0.0, 0.0)
    assert wf.is_done(state) and wf.success(state)  # the last answer counts, accepted or not


@pytest.mark.parametrize("hack", ["ok/no", "Correct or Incorrect", "", "maybe", "\\boxed{Correct}\\boxed{Incorrect}"])
def test_evaluator_hedges_score_nothing(hack):
    for answer in ("2*(7+3)", "7+3"):
        wf = workflow("evaluator_optimizer")
        state = state_on(wf)
        wf.apply("generator", state, answer)
        outcome = wf.apply("evaluator", state, hack)
        assert (outcome.team, outcome.local, outcome.terms["verdict_correct"]) == (0.0, -0.1, 0.0), (hack, answer)


ANSWERERS = {"voting": "generator_0", "evaluator_optimizer": "generator", "debate": "debater_0",
             "orchestrator_workers": "worker_0"}


@pytest.mark.parametrize("name", list(ANSWERERS))
def test_answer_hacks_score_nothing_in_every_workflow(name):
    wf = workflow(name)
    answerer = ANSWERERS[name]
    for hack in HACKS:
        state = state_on(wf)
        outcome, = wf.apply_many(answerer, [state], [hack])
        assert (outcome.team, outcome.local, outcome.terms["correct"]) == (0.0, -0.1, 0.0), (name, hack)


def test_orchestrator_workers_terms():
    wf = workflow("orchestrator_workers")
    state = state_on(wf)
    plan = wf.apply("orchestrator", state, "2*(x+y) x+y 2*(x+y)")
    assert (plan.team, plan.local, plan.terms["format_ok"]) == (0.0, 0.1, 1.0)  # a plan has no outcome yet
    assert "s:x+y" in wf.render("worker_1", state)
    for w, text in zip(wf.workers, ["2*(7+3)", "7+3", "20 21"]):
        wf.apply(w, state, text)
    assert [state.scores[w] for w in wf.workers] == [1.0, 0.0, 0.0]
    final = wf.apply("synthesizer", state, "2*(7+3)")
    assert (final.team, final.terms["correct"], final.terms["any_correct"]) == (1.0, 1.0, 1.0) and wf.success(state)
    for hack in ("2*(x+y) x+y", "2*(x+y) x+y x*y x-y", ""):  # not three strategies
        outcome = wf.apply("orchestrator", state_on(wf), hack)
        assert (outcome.team, outcome.local) == (0.0, -0.1), hack
    for hack in HACKS:
        trial = state_on(wf)
        trial.scores = dict(state.scores)
        outcome = wf.apply("synthesizer", trial, hack)
        assert (outcome.team, outcome.local) == (0.0, -0.1) and not wf.success(trial), hack


def test_debate_majority_of_values():
    wf = workflow("debate")
    state = state_on(wf)
    for d, text in zip(wf.debaters, ["2*(7+3)", "20", "21"]):
        wf.apply(d, state, text)
    assert state.round == 1 and wf.final(state) == ("20", 1.0) and wf.success(state)


def test_no_single_agent_and_known_prompt_styles():
    entry, settings = task_entry("calc_flows"), CalcFlowsConfig()
    with pytest.raises(ValueError, match="no single-agent workflow"):
        entry.build("single", settings, max_turns=1)
    with pytest.raises(ValueError, match="prompt_style"):
        entry.build("voting", settings, prompt_style="verbose")
    with pytest.raises(ValueError, match="max_operand"):
        CalcFlowsConfig(max_operand=2)


def test_heldout_instances_never_train():
    domain = CalcDomain(CalcFlowsConfig())
    train = {domain.problem("train", i) for i in range(2000)}
    held = {domain.problem("heldout", i) for i in range(50)}
    assert held and not train & held


@pytest.mark.parametrize("name", list(ANSWERERS))
def test_scripted_prior_is_broad(name):
    shares = composition(workflow(name), episodes=1500)
    answerer = ANSWERERS[name]
    # First answers only (a debater's later rounds keep or switch: counted apart).
    first = {k: v for k, v in shares.items() if k.startswith(answerer + "/") and "/keep" not in k and "/switch" not in k}
    right = shares[f"{answerer}/right"] / sum(first.values())
    # A worker's "faithful" answer is its own job done right on a wrong formula (the orchestrator's error).
    wrong = {k: v / sum(first.values()) for k, v in first.items() if not k.endswith(("/right", "/faithful"))}
    assert 0.2 < right < 0.5, right  # right about a third of the time on a first answer
    assert max(wrong.values()) < 0.2, max(wrong.items(), key=lambda kv: kv[1])  # no error kind is common
    assert 0.2 < shares["team/success"] < 0.6
    if name == "voting":
        majority = shares["aggregator/majority/right"] + shares["aggregator/majority/wrong"]
        assert 0.4 < majority < 0.6
    if name == "evaluator_optimizer":
        assert 0.5 < shares["evaluator/right"] < 0.7
    if name == "orchestrator_workers":  # three formulas, each right half the time: 0..3 right ~ binomial
        assert 0.08 < shares["orchestrator/3_right"] < 0.2 and 0.08 < shares["orchestrator/0_right"] < 0.2
        majority = shares["synthesizer/majority/right"] + shares["synthesizer/majority/wrong"]
        assert 0.4 < majority < 0.6


def test_scripted_evaluator_and_aggregator_follow_their_skill():
    wf = workflow("voting")
    state = state_on(wf)
    for g, text in zip(wf.generators, ["20", "20", "7+3"]):
        wf.apply(g, state, text)
    always = FlowSkill(pick_majority=1.0)
    assert {respond(wf, "aggregator", state, random.Random(s), always) for s in range(20)} == {"0"}
    ev = workflow("evaluator_optimizer")
    state = state_on(ev)
    ev.apply("generator", state, "20")
    assert respond(ev, "evaluator", state, random.Random(0), FlowSkill(evaluator_right=1.0)) == "ok"
    assert respond(ev, "evaluator", state, random.Random(0), FlowSkill(evaluator_right=0.0)) == "no"


def test_demonstrations_are_compact_prompts_of_training_instances():
    wf = workflow("voting")
    triples = [t for _, t in zip(range(40), demonstrations(wf, 3))]
    assert {a for a, _, _ in triples} == {a.name for a in wf.agents}
    assert all(p.endswith("\n>") for _, p, _ in triples)
    assert gold_value(ITEM) == 20


def test_doctests():
    import doctest

    from teamrl.workflows import calc_flows

    result = doctest.testmod(calc_flows)
    assert result.attempted > 0 and result.failed == 0
