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
predicts. The row's `test_success` is voting's shared cell. The study's page for these rows is
`teamrl.study.scale_report`'s (OUT/scale.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teamrl.study import flow_rows

if TYPE_CHECKING:
    from teamrl.study.rows import Row
    from teamrl.study.seed_run import SeedRun

SCALE_WORKFLOWS = ("voting", "evaluator_optimizer")
"""Duplicated roles (three generators of one role) and distinct roles (an optimizer and an evaluator)."""
SCALE_REGIMES = ("shared", "per_agent")


def produce(seed_run: "SeedRun", row: "Row") -> dict[str, Any]:
    """Every cell of one scale row for one seed: {workflow: {'untrained' | regime: cell}}."""
    cells: dict[str, dict[str, Any]] = {}
    for name in SCALE_WORKFLOWS:
        extra = flow_rows.workflow_overrides(name)
        model_path = flow_rows.workflow_base(seed_run, row, name, reuse_team=False)  # the row's model, not the study's
        cells[name] = {"untrained": flow_rows.test_cell(seed_run, row, extra, model_path, None) | {"base": model_path}}
        for regime in SCALE_REGIMES:
            cells[name][regime] = flow_rows.train_cell(
                seed_run, row, (*extra, f"regime={regime}"), model_path, f"{row.key}-{name}-{regime}-s{seed_run.seed}"
            )
            seed_run.log(
                f"seed {seed_run.seed} {row.key} {name} {regime}: test {cells[name][regime]['test_success']:.1%}"
                f" (untrained {cells[name]['untrained']['test_success']:.1%})"
            )
    gain = {name: cells[name]["shared"]["test_success"] - cells[name]["per_agent"]["test_success"] for name in cells}
    return {"test_success": cells["voting"]["shared"]["test_success"], "cells": cells, "sharing_gain": gain}
