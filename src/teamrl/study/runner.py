"""Run a study: for each seed, warm up its own base, then produce every row, scoring on the test split.

Per seed s: the tiny default is warmed up with warm-up seed `protocol.warmup_seed(s)`; every row of
that seed starts from it (so rows of one seed are paired; `teamrl.study.seed_run`). Results go to
OUT/results.json, row by row as they finish, each with its cell digest (`teamrl.study.cells`): a
re-run skips finished cells, lists the rest with an ETA and refuses a folder whose cells were made
with another config or code.
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Any

from teamrl.config import ConfigError
from teamrl.study import cells, flow_rows, hetero_rows, results_file, scale_rows
from teamrl.study.protocol import Protocol
from teamrl.study.rows import ROWS, Row, Study
from teamrl.study.seed_run import Log, RowProducer, SeedRun, row_config
from teamrl.study.sft_row import sft_row

ROW_KINDS: dict[str, RowProducer] = {
    "sft": sft_row,
    "bases": hetero_rows.produce,
    "flows": flow_rows.produce,
    "scale": scale_rows.produce,
}
"""The row kinds produced outside `SeedRun`, each by its own module."""


def run_study(
    study: Study,
    protocol: Protocol,
    rows: list[Row],
    out: Path,
    overrides: list[str],
    log: Log = print,
    verbose: bool = False,
    dry_run: bool = False,
) -> Path:
    """Every row over every seed; writes OUT/results.json after each row.

    A results.json already in OUT (same study and overrides) is continued: its (row, seed) results are
    kept and not rerun, so a stopped study resumes and a long table can be run a few rows per command.
    Several processes may run other seeds into the same OUT at once (`teamrl study --jobs`): each row's
    result is merged into the file under a lock. dry_run: check the folder and list what remains, run nothing.
    """
    out.mkdir(parents=True, exist_ok=True)
    target = out / "results.json"
    fresh = {
        "study": study.name,
        "config": str(study.config),
        "overrides": overrides,
        "protocol": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(protocol).items()},
        "rows": [],
        "labels": {},
        "results": [],
        "seconds": 0.0,
    }

    def register(results: dict[str, Any]) -> None:
        _check_same(target, results, study, protocol, overrides)
        wanted = set(results["rows"]) | {row.key for row in rows}
        results["rows"] = [key for key in ROWS if key in wanted]  # table order, whatever order rows ran in
        results["labels"].update({row.key: study.label(row) for row in rows})
        results["protocol"]["seeds"] = sorted(set(results["protocol"]["seeds"]) | set(protocol.seeds))

    if dry_run:  # check and list without writing: the folder may not exist yet
        results = results_file.read(target) or json.loads(json.dumps(fresh))
        register(results)
    else:
        results = results_file.update(target, fresh, register)
    done = {(r["row"], r["seed"]) for r in results["results"]}
    digests = _digests(study, protocol, rows, results, out, overrides)
    cells.check_cells(target, results["results"], digests, log)
    todo_cells = [(row.key, seed) for seed in protocol.seeds for row in rows if (row.key, seed) not in done]
    for line in cells.remaining(todo_cells, results["results"], cells.planned_seconds(study)):
        log(line)
    if dry_run:
        return target
    for seed in protocol.seeds:
        todo = [row for row in rows if (row.key, seed) not in done]
        if not todo:
            continue
        started = time.time()
        seed_run = SeedRun(study, protocol, seed, out, overrides, log, verbose, ROW_KINDS)
        warmup_seconds = time.time() - started  # a cached warm-up costs ~0 s

        def note_warmup(results: dict[str, Any], seed: int = seed, seconds: float = warmup_seconds) -> None:
            spent = results.setdefault("warmup_seconds", {})
            spent[str(seed)] = max(spent.get(str(seed), 0.0), seconds)

        results_file.update(target, fresh, note_warmup)
        seed_run.trained.update(
            {r["row"]: Path(r["run_dir"]) for r in results["results"] if r["seed"] == seed and r.get("run_dir")}
        )
        for row in todo:
            record = seed_run.run(row) | {"digest": digests[(row.key, seed)]}
            now = results_file.update(target, fresh, partial(results_file.add_record, record=record))
            todo_cells.remove((row.key, seed))
            if todo_cells:  # the ETA again, now with this cell's measured time
                log(cells.remaining(todo_cells, now["results"], cells.planned_seconds(study))[0])
    return target


def _digests(
    study: Study, protocol: Protocol, rows: list[Row], results: dict[str, Any], out: Path, overrides: list[str]
) -> dict[tuple[str, int], dict[str, str]]:
    """(row, seed) -> this command's cell digest, for every cell it may run and every finished one."""
    wanted = {(row.key, seed) for row in rows for seed in protocol.seeds}
    wanted |= {(r["row"], r["seed"]) for r in results["results"] if r["row"] in ROWS}
    settings = vars(protocol)
    return {
        (key, seed): cells.cell_digest(
            row_config(study, protocol, ROWS[key].overrides, seed, out, f"{key}-s{seed}", overrides), settings
        )
        for key, seed in sorted(wanted)
    }


def _check_same(target: Path, previous: dict[str, Any], study: Study, protocol: Protocol, overrides: list[str]) -> None:
    """Refuse to continue a folder of another study, other overrides or another protocol (seeds aside)."""
    settings = {k: v for k, v in vars(protocol).items() if k != "seeds"}
    earlier = {k: v for k, v in previous.get("protocol", {}).items() if k != "seeds"}
    if previous.get("study") != study.name or previous.get("overrides") != overrides or earlier != settings:
        raise ConfigError(
            f"{target} holds study {previous.get('study')!r} with overrides {previous.get('overrides')} "
            f"and protocol {earlier}; continue it with the same study, overrides and protocol "
            f"(now {study.name!r}, {overrides}, {settings}), or use another --out folder"
        )
