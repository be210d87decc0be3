"""The alerts a finished run raises under other diagnostics settings, from its logged metrics alone.

Alerts never change training, so replaying a run's metrics.jsonl through a fresh `AlertMonitor`
(built from the run's config.yaml plus overrides such as `diagnostics.window=5`) gives exactly the
alerts that run would have raised with those settings (`teamrl alerts RUN_DIR key=value ...`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from teamrl.config import load_config
from teamrl.diagnostics.alerts import Alert
from teamrl.diagnostics.session import RunDiagnostics
from teamrl.report.runs import load_metrics
from teamrl.setup.team import agent_mapping, build_workflow


def observations(rows: list[dict]) -> list[tuple[int, dict]]:
    """(step, metrics) in the order the training loop hands them to the alert monitor: the untrained
    evaluation, each step's training metrics (with its held-out success when evaluated), the final one."""
    out, i = [], 0
    while i < len(rows):
        step, row = rows[i]["step"], {k: v for k, v in rows[i].items() if k != "step"}
        following = rows[i + 1] if i + 1 < len(rows) else {}
        if "train/success" in row:
            out.append((step, row))
        elif step > 0 and following.get("step") == step and "train/success" in following:
            # An in-loop evaluation is logged just before its step's training metrics.
            merged = {k: v for k, v in following.items() if k != "step"} | {"eval/success": row["eval/success"]}
            out.append((step, merged))
            i += 1
        else:  # the untrained or the final evaluation
            out.append((step, {"eval/success": row["eval/success"]}))
        i += 1
    return out


def replay_alerts(run_dir: Path, overrides: Sequence[str] = ()) -> list[Alert]:
    """The alerts of the run in `run_dir` under its own config plus `overrides` (dotted keys)."""
    for name in ("config.yaml", "metrics.jsonl"):
        if not (run_dir / name).is_file():
            raise FileNotFoundError(f"{run_dir} has no {name}: give a run directory written by `teamrl train`")
    config = load_config(run_dir / "config.yaml", list(overrides))
    if config.diagnostics.level == "none":
        raise ValueError(
            f"{run_dir} was configured with diagnostics.level: none, so it logged no per-role "
            "metrics to replay (the collapse rule alone would not need them: pass "
            "diagnostics.level=cheap to replay it)"
        )
    workflow = build_workflow(config)
    try:
        diagnostics = RunDiagnostics(config, workflow.agents, agent_mapping(config, workflow))
    finally:
        workflow.close()
    rows = load_metrics(run_dir / "metrics.jsonl")  # the report's reader: file and line on a bad row
    return [alert for step, metrics in observations(rows) for alert in diagnostics.alerts(step, metrics)]
