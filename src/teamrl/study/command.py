"""`teamrl study NAME`: the study's settings (full or --quick), the run and its report."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from teamrl.study import flow_report, scale_report
from teamrl.study.protocol import Protocol
from teamrl.study.rows import Study, select_rows, study
from teamrl.study.runner import run_study
from teamrl.study.table import write_report

FULL = Protocol(seeds=(0, 1, 2), validation_instances=100, test_instances=100, test_samples=1)
QUICK = Protocol(seeds=(0,), validation_instances=24, test_instances=24, test_samples=1)
QUICK_OVERRIDES = ("train.steps=6", "train.batch_size=8", "train.eval_every=3")
"""--quick: one seed, a short training, small validation and test splits (a smoke run of the whole
table; its numbers are not the study's)."""


def run_command(
    name: str,
    quick: bool,
    seeds: list[int] | None,
    rows: list[str] | None,
    out: str | None,
    overrides: list[str],
    instances: int | None = None,
    verbose: bool = False,
    jobs: int = 1,
    remaining_only: bool = False,
    accept_code: bool = False,
    test_instances: int | None = None,
) -> Path:
    """Run the named study's rows over its seeds; returns the report page (OUT/index.html).

    A `policy.model=...` override replaces every model the study names (`Study.with_model`).
    remaining_only: list the cells still to run with their ETA, run nothing (returns OUT/results.json).
    seeds, instances: replace the protocol's seeds and its validation / test instance counts.
    test_instances: replace the test split's size only (the Split-Calc generator draws as many as asked).
    jobs: run the seeds in this many processes at once (one torch thread each), into the same folder.
    accept_code: keep finished cells made at another code digest without re-running one to check them.
    """
    chosen = whole_study_model(study(name), overrides)
    chosen, protocol, quick_overrides = planned(chosen, quick)
    protocol = replace(
        protocol,
        seeds=tuple(seeds) if seeds else protocol.seeds,
        validation_instances=instances or protocol.validation_instances,
        test_instances=test_instances or instances or protocol.test_instances,
    )
    folder = study_folder(name, quick, out)
    all_overrides = [*quick_overrides, *overrides]
    if remaining_only:
        run_study(chosen, protocol, select_rows(rows, chosen), folder, all_overrides, dry_run=True)
        return folder / "results.json"
    if jobs > 1 and len(protocol.seeds) > 1:
        groups = [list(protocol.seeds[i::jobs]) for i in range(min(jobs, len(protocol.seeds)))]
        select_rows(rows, chosen)  # a bad row name fails here, not in every job
        _run_jobs(name, quick, groups, rows, folder, overrides, instances, accept_code, test_instances)
        return _report(chosen, folder / "results.json")
    results = run_study(
        chosen, protocol, select_rows(rows, chosen), folder, all_overrides, verbose=verbose, accept_code=accept_code
    )
    return _report(chosen, results)


def study_folder(name: str, quick: bool, out: str | None) -> Path:
    """The study's output folder: --out, else runs/study-NAME[-quick]."""
    return Path(out) if out else Path("runs") / f"study-{name}{'-quick' if quick else ''}"


def whole_study_model(chosen: Study, overrides: list[str]) -> Study:
    """The study with the user's `policy.model=...` (the last one given) in place of every model it names."""
    models = [o.split("=", 1)[1] for o in overrides if o.startswith("policy.model=")]
    return chosen.with_model(models[-1]) if models else chosen


def planned(chosen: Study, quick: bool) -> tuple[Study, Protocol, tuple[str, ...]]:
    """The study as run, its protocol and the --quick overrides. A study that plans its budgets runs
    --quick as the study with its quick budget in place of the full one (so the ETA prices quick cells);
    the others run FULL, or QUICK with QUICK_OVERRIDES."""
    if chosen.budget is None:
        return (chosen, QUICK, QUICK_OVERRIDES) if quick else (chosen, FULL, ())
    if quick:
        if chosen.quick_budget is None:
            raise ValueError(
                f"study {chosen.name!r} plans a full budget but no quick_budget for --quick; give it "
                "one (Study.quick_budget), or run without --quick"
            )
        chosen = replace(chosen, budget=chosen.quick_budget)
    budget = chosen.budget
    assert budget is not None  # the full budget, or the quick one in its place
    protocol = Protocol(
        seeds=tuple(range(budget.seeds)),
        validation_instances=budget.validation_instances,
        test_instances=budget.test_instances,
        test_samples=budget.test_samples,
    )
    return chosen, protocol, ()


def _report(chosen: Study, results: Path) -> Path:
    """The study's page; a workflow matrix also gets its report (flows.md, with the alerts scored), a scale
    axis its own (scale.md)."""
    page = write_report(results)
    if chosen.flows:
        print(f"workflow matrix report: {flow_report.write(results)}")
    if any(row.kind == "scale" for row in select_rows(None, chosen)):
        print(f"scale axis report: {scale_report.write(results)}")
    return page


def _run_jobs(
    name: str,
    quick: bool,
    groups: list[list[int]],
    rows: list[str] | None,
    folder: Path,
    overrides: list[str],
    instances: int | None,
    accept_code: bool = False,
    test_instances: int | None = None,
) -> None:
    """One `teamrl study` process per seed group, one torch thread each; logs in OUT/job-<seeds>.log."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # one core per job: jobs x threads stays within the cores
    running = []
    for group in groups:
        command = [
            sys.executable,
            "-m",
            "teamrl.cli",
            "study",
            name,
            *overrides,
            "--out",
            str(folder),
            "--seeds",
            *map(str, group),
            *(["--quick"] if quick else []),
            *(["--rows", *rows] if rows else []),
            *(["--instances", str(instances)] if instances else []),
            *(["--test-instances", str(test_instances)] if test_instances else []),
            *(["--accept-code"] if accept_code else []),
        ]
        log = folder / f"job-{'-'.join(map(str, group))}.log"
        with open(log, "w") as handle:
            running.append((group, log, subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)))
        print(f"study job for seeds {' '.join(map(str, group))}: log {log}", flush=True)
    failed = [(group, log) for group, log, process in running if process.wait() != 0]
    if failed:
        tails = "\n".join(f"seeds {g}: {log}\n" + "\n".join(log.read_text().splitlines()[-5:]) for g, log in failed)
        raise RuntimeError(
            f"{len(failed)} of {len(running)} study jobs failed (the rows they finished are kept in "
            f"{folder / 'results.json'}; run the command again to continue):\n{tails}"
        )
