"""Outcomes read from a run's metrics (cliffs, adherence) and the alerts scored against them."""

from pathlib import Path

import pytest

from teamrl.diagnostics.alerts import Alert
from teamrl.study.alert_scores import Case, fired_units, score
from teamrl.study.run_outcomes import Cliff, adherence_fall, adherence_onset, cliff, start_end, training_series


def test_cliff_needs_a_drop_that_does_not_recover():
    assert cliff([(0, 0.2), (5, 0.5), (10, 0.5)]) is None
    assert cliff([(0, 0.2), (5, 0.5), (10, 0.3), (15, 0.36)]) is None  # 0.14 below: under 0.15
    assert cliff([(0, 0.2), (5, 0.5), (10, 0.3), (15, 0.35)]) == Cliff(0.5, 5, 0.35, 10)  # exactly 0.15
    # A partial recovery above peak - drop restarts the onset at the last fall.
    assert cliff([(0, 0.2), (5, 0.6), (10, 0.4), (15, 0.5), (20, 0.3), (25, 0.35)]) == Cliff(0.6, 5, 0.35, 20)
    # Equal peaks: the first one counts, so the drop is measured from the earliest best.
    assert cliff([(0, 0.6), (5, 0.6), (10, 0.1)]).peak_step == 0
    assert cliff([(0, 0.6), (5, 0.3)], drop=0.4) is None
    with pytest.raises(ValueError, match="at least one"):
        cliff([])


def rows_with(role, values):
    rows = [{"step": 0, "eval/success": 0.1}]
    for step, value in enumerate(values, start=1):
        rows.append({"step": step, "train/success": 0.5, f"diag/role/{role}/format_ok": value})
    return rows


def test_adherence_compares_the_first_steps_with_the_last():
    rows = rows_with("aggregator", [1.0, 1.0, 0.7, 0.9, 0.8, 0.6, 0.5, 0.4, 0.5, 0.5])
    assert training_series(rows, "diag/role/aggregator/format_ok")[0] == (1, 1.0)
    start, end = start_end(training_series(rows, "diag/role/aggregator/format_ok"))
    assert start == pytest.approx(0.9) and end == pytest.approx(0.5)
    assert adherence_fall(rows, "aggregator") == pytest.approx(0.4)
    assert adherence_fall(rows, "generator") is None  # not logged
    assert adherence_fall(rows_with("aggregator", [1.0] * 7), "aggregator") is None  # too short to tell
    # A role that stays well formed but stops doing its job lost adherence too: the larger fall counts.
    job = rows_with("evaluator", [1.0] * 10)
    for row, verdict in zip(job[1:], [0.8, 0.8, 0.8, 0.8, 0.7, 0.6, 0.5, 0.5, 0.5, 0.5]):
        row["diag/role/evaluator/verdict_correct"] = verdict
        row["diag/role/evaluator/correct"] = 1.0  # a verifier's job is its verdict, not this
    assert adherence_fall(job, "evaluator") == pytest.approx(0.8 - 0.52)
    assert adherence_onset(job, "evaluator") == 8  # steps 4-8 average 0.62: 0.18 below 0.8
    # Baseline 0.9 (steps 1-3); the first window after it, steps 4-8, averages 0.64: onset at step 8.
    assert adherence_onset(rows, "aggregator") == 8
    # A fall that comes later: the windows ending at steps 8 and 9 stay within 0.15, step 10's does not.
    late = rows_with("aggregator", [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.9, 0.8, 0.3])
    assert adherence_onset(late, "aggregator") == 10


def case(seed, cliff_happened, onset=None, roles=None):
    c = Case(seed, "flows_hot", "voting", "shared", Path(f"/runs/{seed}-{cliff_happened}-{roles}"))
    c.outcomes = {"cliff": {"run": cliff_happened}, "adherence": roles or {}, "no gain": {}}
    c.onsets = {"cliff": {"run": onset} if onset is not None else {}, "adherence": {}, "no gain": {}}
    return c


def alert(step, kind, subject="x"):
    return Alert(step, kind, subject, "")


def test_alerts_score_as_detectors_per_unit_with_lead_time():
    cases = [case(0, True, onset=30), case(1, True, onset=20), case(2, False), case(3, False)]
    fired = {cases[0].run_dir: [alert(10, "echo_chamber"), alert(25, "echo_chamber")],  # first firing counts
             cases[1].run_dir: [], cases[2].run_dir: [alert(5, "echo_chamber")], cases[3].run_dir: []}
    replayed = {(c.run_dir, ("s",)): fired[c.run_dir] for c in cases}
    s = score("echo_chamber", "cliff", ("s",), cases, replayed)
    assert (s.tp, s.fp, s.fn, s.tn) == (1, 1, 1, 1)
    assert s.precision == 0.5 and s.recall == 0.5 and s.f1 == 0.5 and s.leads == (20,) and s.base_rate == 0.5
    # Dominant-role alerts are about the role they say drifts ('top>other'), one unit per role.
    assert fired_units([alert(7, "dominant_role", "generator>aggregator"), alert(9, "collapse")],
                       "dominant_role", "adherence") == {"aggregator": 7}
    roles = case(0, False, roles={"aggregator": True, "generator": False})
    replayed = {(roles.run_dir, ("s",)): [alert(4, "dominant_role", "aggregator>generator")]}
    s = score("dominant_role", "adherence", ("s",), [roles], replayed)
    assert (s.tp, s.fp, s.fn, s.tn) == (0, 1, 1, 0) and s.precision == 0.0 and s.recall == 0.0
    empty = score("collapse", "cliff", ("s",), [case(5, False)], {(Path("/runs/5-False-None"), ("s",)): []})
    assert empty.precision is None and empty.recall is None and empty.f1 == 0.0


def summary(seed, test, peak, final, share=None, diversity=None, adherence=None):
    from teamrl.study.flow_report import RunSummary
    return RunSummary(seed, test, test - 0.1, peak, final, 10, peak - final >= 0.15, share, "generator" if share else None,
                      None, diversity, adherence or {}, {}, [(0, 0.1), (10, peak), (60, final)], {})


def test_findings_and_mitigations_from_hand_made_cells():
    from teamrl.study.flow_report import findings, mitigation_table
    trained = {("hot", "voting", "shared"): [summary(0, 0.5, 0.6, 0.55, 0.9, (0.5, 0.1)), summary(1, 0.4, 0.5, 0.5, 0.7)],
               ("hot", "voting", "per_role"): [summary(0, 0.6, 0.7, 0.4), summary(1, 0.6, 0.6, 0.58)],
               ("hot", "voting", "shared+damping"): [summary(0, 0.45, 0.5, 0.5, 0.8, (0.5, 0.3))]}
    text = "\n".join(findings(trained, "hot"))
    # per_role - shared on test: +0.10 and +0.20 -> mean +15.0 points, ahead on both seeds
    assert "+15.0 points" in text and "ahead on 2, behind on 0, tied 0 of 2" in text
    assert "in 1 of 2 separate-policy runs and 0 of 2 shared runs" in text  # seed 0 per_role fell 0.30
    assert "from peak to last evaluation 16.0% vs 2.5%" in text  # (0.30 + 0.02) / 2 vs (0.05 + 0) / 2
    assert "averaged 80% over the shared runs; at least 60% (the alert's default) in 2 of 2" in text
    table = mitigation_table(trained, "hot")
    # one seed in common: damping - shared = -5.0 points; diversity fell 0.20 with, 0.40 without
    assert "| voting | damping | -5.0 points (ahead on 0, behind on 1, tied 0 of 1) |" in table
    assert "| 0.20 / 0.40 |" in table


def test_agreement_compares_offered_answers_with_independent_ones():
    from teamrl.study.flow_report import agreement
    from teamrl.study.run_outcomes import duplicated_agents, errors_coincide
    rows = [{"step": 1, "diag/agent/generator_0/x": 1, "diag/agent/generator_1/x": 1, "diag/agent/generator_2/x": 1,
             "diag/agent/aggregator/x": 1}]
    assert duplicated_agents(rows, ["generator", "aggregator"]) == {"generator": 3}
    x = summary(0, 0.5, 0.6, 0.6)
    x.test_roles, x.agents = {"generator": 0.5, "aggregator": 0.55, "aggregator/offered": 0.6}, {"generator": 3}
    lines = agreement({("r", "voting", "shared"): [x]}, "r",
                      {("r", "voting"): {0: {"generator": 0.2, "aggregator/offered": 0.4}}})
    # independent: 1 - 0.5^3 = 87.5% (shown 88%); untrained: 1 - 0.8^3 = 48.8% (49%)
    assert lines[1] == ("  - voting untrained: generator accuracy 20%; a right answer among the 3 offered in 40% "
                        "of test episodes, where independent generators would offer 49%")
    assert lines[2].endswith("offered in 60% of test episodes, where independent generators would offer 88%")
    assert errors_coincide(x.test_roles, x.agents) is True  # 60% <= 87.5% - 5
    assert errors_coincide({"generator": 0.5, "aggregator/offered": 0.83}, {"generator": 3}) is False
    assert errors_coincide({"debater": 0.5}, {"debater": 3}) is None  # no picker: not judged
