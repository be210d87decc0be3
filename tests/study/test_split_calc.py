"""Split-Calc's reward terms, its verifiers against degenerate answers, and the roles' interdependence."""

import pytest

from teamrl.demos.split_calc import composition, substitute
from teamrl.tasks.split_calc import OPERATIONS, SplitCalcConfig, answer_value, evaluate_formula, gold_value
from teamrl.workflows.split_calc_team import SplitCalcWorkflow

CONFIG = SplitCalcConfig()


def state_for(operation: str):
    """A validation episode whose operation is `operation`."""
    wf = SplitCalcWorkflow(CONFIG)
    for index in range(100):
        state = wf.new_state("heldout", index)
        if state.item[0] == operation:
            return wf, state
    raise AssertionError(operation)


def test_team_terms_need_both_roles():
    wf, state = state_for("twice sum")
    _, x, y = state.item
    analyst = wf.apply("analyst", state, "2*(x+y)")
    assert analyst.terms == {"team": 1.0, "local": CONFIG.agreement_coef, "format": 0.0}
    calc = wf.apply("calculator", state, f"2*({x}+{y})")  # arithmetic on the operands: the verifier computes it
    assert calc.terms == {"team": 1.0, "local": CONFIG.faithful_coef, "format": 0.0}
    assert wf.success(state)
    assert wf.apply("calculator", wf.new_state("heldout", 0), str(2 * (x + y))).terms["format"] == 0.0
    # The calculator never sees the operation's name, the analyst never the operands.
    assert "twice" not in wf.render("calculator", state) and f"x={x}" not in wf.render("analyst", state)


def test_a_wrong_formula_misleads_a_faithful_calculator():
    wf, state = state_for("product")
    _, x, y = state.item
    analyst = wf.apply("analyst", state, "x+y")
    assert analyst.terms["team"] == 0.0
    calc = wf.apply("calculator", state, str(x + y))  # right arithmetic on the wrong formula
    assert calc.terms["local"] == CONFIG.faithful_coef
    assert calc.terms["team"] == float(x + y == x * y)


def test_analyst_local_is_the_share_of_operand_pairs_it_gets_right():
    wf, state = state_for("sum")
    # x*2 equals x+y exactly when y == x: 9 of the 81 pairs.
    out = wf.apply("analyst", state, "x*2")
    assert out.terms["team"] == 0.0
    assert out.terms["local"] == pytest.approx(CONFIG.agreement_coef * 9 / 81)


@pytest.mark.parametrize("answer", ["", "x+y x-y x*y", "x+y,x*y", "x+y;x*y", "all of them", "x+y" * 10,
                                    "__import__('os')", "x**y"])
def test_degenerate_formulas_score_nothing(answer):
    wf, state = state_for("sum")
    out = wf.apply("analyst", state, answer)
    assert out.team == 0.0 and out.local <= 0.0


@pytest.mark.parametrize("answer", ["", "12 13 14", "1,2,3", "7777777", "x", "x*y", "the answer is 7", "--3",
                                    "1+2+3+4+5+6+7+8+9+10+11+12+13"])
def test_degenerate_values_score_nothing(answer):
    wf, state = state_for("product")
    wf.apply("analyst", state, "x*y")
    out = wf.apply("calculator", state, answer)
    assert out.team == 0.0 and out.local <= 0.0


def test_formula_evaluator_by_hand():
    assert evaluate_formula("x*x-y", 4, 3) == 13
    assert evaluate_formula("(x+y)*y", 2, 3) == 15
    assert evaluate_formula("3*x+y", 2, 3) == 9
    assert evaluate_formula("x+(y", 1, 1) is None
    assert evaluate_formula("x+y)", 1, 1) is None
    assert answer_value("-12") == -12 and answer_value("1.5") is None and answer_value("--3") is None
    assert answer_value("2*(7+3)") == 20 and answer_value("2*7+3") == 17 and answer_value("x") is None
    assert gold_value(("square minus y", 4, 3)) == 13
    assert substitute("2*(x+y)", 7, 3) == "2*(7+3)"


def test_every_operation_formula_parses():
    for formula in OPERATIONS.values():
        assert evaluate_formula(formula, 2, 3) is not None


def test_demos_are_broad_not_planted():
    shares = composition(SplitCalcWorkflow(CONFIG), episodes=600)
    for agent in ("analyst", "calculator"):
        mine = {k: v for k, v in shares.items() if k.startswith(agent + "/")}
        correct = mine[f"{agent}/correct"]
        errors = [v for k, v in mine.items() if not k.endswith("/correct")]
        assert 0.4 < correct < 0.6 and max(errors) < 0.3 and max(errors) < correct
    assert 0.15 < shares["team/success"] < 0.45


def test_the_single_agent_sees_both_halves():
    wf = SplitCalcWorkflow(CONFIG, single_agent=True)
    state = wf.new_state("heldout", 0)
    operation, x, y = state.item
    prompt = wf.render("solo", state)
    assert operation in prompt and f"x={x} y={y}" in prompt
    out = wf.apply("solo", state, str(gold_value(state.item)))
    assert out.terms == {"team": 1.0, "local": 0.0, "format": 0.0}
