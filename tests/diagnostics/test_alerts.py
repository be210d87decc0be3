"""Alerts on synthetic metric streams: each fires on its pattern, stays quiet on a healthy run, fires once."""

from __future__ import annotations

from teamrl.config import DiagnosticsConfig
from teamrl.diagnostics.alerts import AlertMonitor

CONFIG = DiagnosticsConfig(baseline_steps=2, window=3)
SHARED = {"shared": ["tool", "plan"]}


def _run(monitor: AlertMonitor, rows: list[dict[str, float]]) -> list:
    fired = []
    for step, row in enumerate(rows, start=1):
        fired += monitor.observe(step, row)
    return fired


def _shared_rows(steps: int, tool_share, plan_len, plan_format=lambda t: 1.0) -> list[dict[str, float]]:
    return [{"diag/role/tool/grad_share": tool_share(t), "diag/role/plan/grad_share": 1 - tool_share(t),
             "diag/role/tool/response_len": 30.0, "diag/role/plan/response_len": plan_len(t),
             "diag/role/plan/format_ok": plan_format(t), "diag/role/tool/format_ok": 1.0}
            for t in range(steps)]


def test_dominant_role_fires_when_the_other_role_grows_toward_it():
    # plan starts at 6 tokens, tool at 30; plan climbs 2 tokens a step while tool holds 85% of the gradient
    rows = _shared_rows(10, lambda t: 0.85, lambda t: 6.0 + 2 * t)
    fired = _run(AlertMonitor(CONFIG, SHARED), rows)
    assert [(a.kind, a.subject) for a in fired] == [("dominant_role", "tool>plan")]  # once, not every step
    # plan baseline 7 (mean of 6, 8), gap 23: 30% of it = 6.9, so the window mean must reach 13.9;
    # at step s the window holds rows s-3..s-1 (row t at step t+1), mean 2s + 2: first at step 6 (14)
    assert fired[0].step == 6
    assert "'tool' carries 85%" in fired[0].message and "role_balanced" in fired[0].message


def test_dominant_role_fires_on_a_format_collapse_too():
    rows = _shared_rows(8, lambda t: 0.9, lambda t: 6.0, lambda t: 1.0 if t < 3 else 0.5)
    fired = _run(AlertMonitor(CONFIG, SHARED), rows)
    assert [a.kind for a in fired] == ["dominant_role"]
    # step 5 sees rows 2..4: formats 1, .5, .5 -> mean 2/3, a drop of 1/3 >= 0.2
    assert fired[0].step == 5
    assert "well-formed answers fell from 100% to 67%" in fired[0].message


def test_no_dominant_alert_without_drift_or_without_dominance():
    steady = _shared_rows(12, lambda t: 0.95, lambda t: 6.0 + (t % 2))  # dominant but plan keeps its length
    assert _run(AlertMonitor(CONFIG, SHARED), steady) == []
    balanced = _shared_rows(12, lambda t: 0.5, lambda t: 6.0 + 2 * t)  # drift without a dominant role
    assert _run(AlertMonitor(CONFIG, SHARED), balanced) == []
    per_role = _shared_rows(12, lambda t: 0.95, lambda t: 6.0 + 2 * t)  # separate policies: nothing shared
    assert _run(AlertMonitor(CONFIG, {"tool": ["tool"], "plan": ["plan"]}), per_role) == []


def _echo_rows(cos, diversity, steps: int = 10) -> list[dict[str, float]]:
    return [{"diag/role/generator/dup_grad_cos": cos(t), "diag/role/generator/diversity": diversity(t)}
            for t in range(steps)]


def test_echo_chamber_fires_when_aligned_duplicates_stop_differing():
    rows = _echo_rows(lambda t: 0.9, lambda t: max(0.8 - 0.15 * t, 0.0))
    fired = _run(AlertMonitor(CONFIG, {}), rows)
    assert [(a.kind, a.subject) for a in fired] == [("echo_chamber", "generator")]
    # baseline 0.725 (rows 0, 1); the window mean must fall to half of it, 0.3625: step 5 averages
    # rows 2..4 = (0.5 + 0.35 + 0.2) / 3 = 0.35
    assert fired[0].step == 5
    assert "gradient cosine up to 0.90" in fired[0].message


def test_no_echo_chamber_when_gradients_disagree_or_outputs_stay_diverse():
    uncorrelated = _echo_rows(lambda t: 0.2, lambda t: max(0.8 - 0.15 * t, 0.0))
    assert _run(AlertMonitor(CONFIG, {}), uncorrelated) == []
    diverse = _echo_rows(lambda t: 0.95, lambda t: 0.7 + 0.05 * (t % 2))
    assert _run(AlertMonitor(CONFIG, {}), diverse) == []


def test_echo_chamber_fires_on_a_one_update_alignment_then_no_gradient():
    """As in the voting run of the README: the generators line up for one update, then fail alike and
    leave no gradient (no cosine is logged); their diversity collapses over the next steps."""
    diversity = [1.0] * 6 + [0.58, 0.48, 0.05, 0.05, 0.05]
    rows = [{"diag/role/generator/diversity": d} for d in diversity]
    for t in range(8):
        rows[t]["diag/role/generator/dup_grad_cos"] = 0.85 if t == 7 else 0.1
    config = DiagnosticsConfig(baseline_steps=2, window=5)
    fired = _run(AlertMonitor(config, {}), rows)
    # (rows are steps 1..11) diversity window means: step 9 (1, 1, .58, .48, .05) = 0.622 > 0.5,
    # step 10 (1, .58, .48, .05, .05) = 0.432 <= 0.5 (half the baseline 1.0)
    assert [(a.kind, a.step) for a in fired] == [("echo_chamber", 10)]
    assert "gradient cosine up to 0.85 over their last 5 updates" in fired[0].message
    never_aligned = [{k: (0.1 if k.endswith("cos") else v) for k, v in row.items()} for row in rows]
    assert _run(AlertMonitor(config, {}), never_aligned) == []


def test_collapse_names_the_best_checkpoint_and_rearms_after_recovery():
    monitor = AlertMonitor(CONFIG, {})
    evals = {0: 0.3, 10: 0.8, 20: 0.55, 30: 0.5, 40: 0.75, 50: 0.4}
    fired = [a for step, value in evals.items() for a in monitor.observe(step, {"eval/success": value})]
    assert [(a.kind, a.step) for a in fired] == [("collapse", 20), ("collapse", 50)]
    assert "peak of 80.0% at step 10" in fired[0].message and "checkpoints/best (saved at step 10)" in fired[0].message


def test_collapse_below_the_initial_model_says_no_checkpoint_beat_it():
    monitor = AlertMonitor(CONFIG, {})
    fired = [a for step, v in ((0, 0.6), (10, 0.3)) for a in monitor.observe(step, {"eval/success": v})]
    assert len(fired) == 1 and "the initial model" in fired[0].message


def test_a_healthy_run_raises_nothing():
    """Roles keep their lengths and formats, duplicates stay diverse, held-out success climbs."""
    monitor = AlertMonitor(CONFIG, SHARED)
    fired = []
    for step in range(1, 41):
        row = _shared_rows(1, lambda t: 0.55, lambda t: 6.0 + 0.5 * (step % 3))[0]
        row |= {"diag/role/generator/dup_grad_cos": 0.3, "diag/role/generator/diversity": 0.6}
        if step % 10 == 0:
            row["eval/success"] = 0.3 + 0.01 * step
        fired += monitor.observe(step, row)
    assert fired == []


def _stall_rows(steps: int, calc_adv, success) -> list[dict[str, float]]:
    return [{"diag/role/analyst/adv_abs": 0.4, "diag/role/calculator/adv_abs": calc_adv(t),
             "train/success": success(t)} for t in range(steps)]


def test_stalled_role_fires_when_a_role_gets_no_signal_while_the_team_fails():
    # calculator's advantages are 0 from row 2 on (a constant answer); the team succeeds 10% of the time
    rows = _stall_rows(8, lambda t: 0.3 if t < 2 else 0.0, lambda t: 0.1)
    fired = _run(AlertMonitor(CONFIG, {"p": ["analyst", "calculator"]}), rows)
    assert [(a.kind, a.subject) for a in fired] == [("stalled_role", "calculator")]  # once; analyst learns
    assert fired[0].step == 5  # the window (rows 2..4) is all zeros at step 5
    assert "the team succeeds in only 10%" in fired[0].message


def test_no_stalled_alert_for_a_team_that_is_done_or_a_role_that_still_learns():
    solved = _stall_rows(8, lambda t: 0.0, lambda t: 0.95)  # no signal because every candidate succeeds
    assert _run(AlertMonitor(CONFIG, {"p": ["analyst", "calculator"]}), solved) == []
    flickering = _stall_rows(8, lambda t: 0.2 if t % 3 == 0 else 0.0, lambda t: 0.1)  # signal now and then
    assert _run(AlertMonitor(CONFIG, {"p": ["analyst", "calculator"]}), flickering) == []
