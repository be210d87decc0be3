"""The scale rows of `teamrl study real_scale_calc`: the policy-sharing paper's scale axis.

The claim checked (policy sharing across agents): sharing one policy helps agents that play the same
role (voting's duplicated generators) and hurts agents with distinct roles (the evaluator-optimizer's
evaluator and optimizer), and how much either way depends on the model's scale. One row per scale
(its overrides name the model: the tiny character model, SmolLM2-135M, Gemma-3-270M), all on the
same calc_flows content, settings and budget. Per seed and per workflow of `SCALE_WORKFLOWS`:
  untrained:  the base scored on the test split;
  shared:     one policy for every agent, trained (AT-GRPO), best checkpoint on validation, tested;
  per_agent:  a policy per agent (evaluator-optimizer: the same as per role), trained and tested alike.
The cells are `teamrl.study.flow_rows`'s (test success and each role's accuracy); the record adds
`sharing_gain` (shared - per_agent test success per workflow), the quantity whose sign the claim
predicts. The row's `test_success` is voting's shared cell. The study writes OUT/scale.md (`write`):
the sharing gain per scale and workflow over seeds, then every row's cells.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamrl.study import flow_rows
from teamrl.study.protocol import summarize

if TYPE_CHECKING:
    from teamrl.study.rows import Row
    from teamrl.study.runner import SeedRun

SCALE_WORKFLOWS = ("voting", "evaluator_optimizer")
"""Duplicated roles (three generators of one role) and distinct roles (an optimizer and an evaluator)."""
SCALE_REGIMES = ("shared", "per_agent")


def produce(seed_run: "SeedRun", row: "Row") -> dict[str, Any]:
    """Every cell of one scale row for one seed: {workflow: {'untrained' | regime: cell}}."""
    cells: dict[str, dict[str, Any]] = {}
    for name in SCALE_WORKFLOWS:
        extra = flow_rows.workflow_overrides(name)
        model_path = flow_rows.warm_base(seed_run, row, name, reuse_team=False)  # the row's model, not the study's
        cells[name] = {"untrained": flow_rows.test_cell(seed_run, row, extra, model_path, None) | {"base": model_path}}
        for regime in SCALE_REGIMES:
            cells[name][regime] = flow_rows.train_cell(seed_run, row, (*extra, f"regime={regime}"), model_path,
                                                       f"{row.key}-{name}-{regime}-s{seed_run.seed}")
            seed_run.log(f"seed {seed_run.seed} {row.key} {name} {regime}: test {cells[name][regime]['test_success']:.1%}"
                         f" (untrained {cells[name]['untrained']['test_success']:.1%})")
    gain = {name: cells[name]["shared"]["test_success"] - cells[name]["per_agent"]["test_success"] for name in cells}
    return {"test_success": cells["voting"]["shared"]["test_success"], "cells": cells, "sharing_gain": gain}


def gain_table(results: dict[str, Any]) -> str:
    """A markdown table of the claim's quantity: per scale row and workflow, shared - per_agent test
    success, mean ± std over seeds, with the seeds where sharing won."""
    from teamrl.study.rows import ROWS  # rows names this module's kind; a top-level import would be circular

    gains: dict[tuple[str, str], list[float]] = {}
    for record in results["results"]:
        if ROWS.get(record["row"]) is not None and ROWS[record["row"]].kind == "scale":
            for name, gain in record["sharing_gain"].items():
                gains.setdefault((record["row"], name), []).append(gain)
    lines = ["| scale | workflow | shared - per_agent (test) | seeds | sharing won |", "|---|---|---|---|---|"]
    for (row, name), values in gains.items():
        s = summarize(values)
        spread = "" if s.std is None else f" ± {100 * s.std:.1f}"
        lines.append(f"| {results['labels'].get(row, row)} | {name} | {100 * s.mean:+.1f} pts{spread} | {s.n} | "
                     f"{sum(v > 0 for v in values)} of {s.n} |")
    return "\n".join(lines)


def write(results_path: Path) -> Path:
    """OUT/scale.md: the sharing gain per scale and workflow, then every scale row's cells."""
    results = json.loads(results_path.read_text())
    rows = [row for row in results["rows"] if any(r["row"] == row for r in results["results"])]
    parts = ["# Scale axis: shared vs per-agent policies", "", gain_table(results)]
    parts += [f"\n## {results['labels'].get(row, row)}\n\n{flow_rows.matrix(results, row)}" for row in rows]
    page = results_path.with_name("scale.md")
    page.write_text("\n".join(parts) + "\n")
    return page
