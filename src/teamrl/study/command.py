"""`teamrl study NAME`: the study's settings (full or --quick), the run and its report."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from teamrl.study.protocol import Protocol
from teamrl.study.rows import select_rows, study
from teamrl.study.runner import run_study
from teamrl.study.table import write_report

FULL = Protocol(seeds=(0, 1, 2), validation_instances=100, test_instances=100, test_samples=1)
QUICK = Protocol(seeds=(0,), validation_instances=24, test_instances=24, test_samples=1)
QUICK_OVERRIDES = ("train.steps=6", "train.batch_size=8", "train.eval_every=3")
"""--quick: one seed, a short training, small validation and test splits (a smoke run of the whole
table; its numbers are not the study's)."""


def run_command(name: str, quick: bool, seeds: list[int] | None, rows: list[str] | None, out: str | None,
                overrides: list[str], instances: int | None = None, verbose: bool = False) -> Path:
    """Run the named study's rows over its seeds; returns the report page (OUT/index.html).

    seeds, instances: replace the protocol's seeds and its validation / test instance counts.
    """
    chosen = study(name)
    protocol = QUICK if quick else FULL
    protocol = replace(protocol, seeds=tuple(seeds) if seeds else protocol.seeds,
                       validation_instances=instances or protocol.validation_instances,
                       test_instances=instances or protocol.test_instances)
    folder = Path(out) if out else Path("runs") / f"study-{name}{'-quick' if quick else ''}"
    all_overrides = [*(QUICK_OVERRIDES if quick else ()), *overrides]
    results = run_study(chosen, protocol, select_rows(rows), folder, all_overrides, verbose=verbose)
    return write_report(results)
