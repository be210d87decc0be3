"""Longer runs of some workflow-matrix cells at the config's learning rate (late behaviour).

The `flows` row of `teamrl study workflows_calc` runs 60 steps, and at the config's learning rate its
best checkpoints are at steps 50-60: still rising. This script reruns chosen cells of that row for more
steps, with the study's own functions (`SeedRun`, `flow_rows.train_cell`, `flow_rows.test_cell`), one seed
per call, into a results file that `python -m teamrl.study.flow_report` reads (row `flows_long`):

    TEAMRL_CACHE=... python -m scripts.study.flows_long_runs --seed 0 --steps 120 --out runs/flows-long \\
        voting:shared voting:per_agent debate:shared debate:per_agent
    python -m teamrl.study.flow_report runs/flows-long/results.json --plots runs/flows-long
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from teamrl.study import flow_rows, results_file
from teamrl.study.command import FULL
from teamrl.study.rows import ROWS, STUDIES, Row
from teamrl.study.seed_run import SeedRun


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cells", nargs="+", help="workflow:regime, e.g. voting:shared")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    longer = (f"train.steps={args.steps}", f"train.eval_every={args.eval_every}")
    row = Row("flows_long", "flows", f"study workflows, {args.steps} steps", (*ROWS["flows"].overrides, *longer))
    seed_run = SeedRun(STUDIES["workflows_calc"], FULL, args.seed, args.out, [], print)
    cells: dict[str, dict] = {}
    for item in args.cells:
        workflow, regime = item.split(":")
        extra = (*flow_rows.workflow_overrides(workflow), f"regime={regime}")
        model_path = flow_rows.workflow_base(seed_run, row, workflow)
        if workflow not in cells:
            cells[workflow] = {"untrained": flow_rows.test_cell(seed_run, row, extra[:-1], model_path, None)}
        cells[workflow][regime] = flow_rows.train_cell(seed_run, row, extra, model_path,
                                                       f"{row.key}-{workflow}-{regime}-s{args.seed}")
        print(f"seed {args.seed} {workflow} {regime}: test {cells[workflow][regime]['test_success']:.1%}", flush=True)
    record = {"row": row.key, "label": row.label, "seed": args.seed, "cells": cells,
              "test_success": next(iter(cells.values()))[args.cells[0].split(":")[1]]["test_success"]}
    target = args.out / "results.json"
    results_file.update(target, {"study": "workflows_calc", "results": []}, lambda r: results_file.add_record(r, record))


if __name__ == "__main__":
    main()
