"""Run a study: for each seed, warm up its own base, then produce every row, scoring on the test split.

Per seed s: the tiny default is warmed up with warm-up seed `protocol.warmup_seed(s)`; every row of
that seed starts from it (so rows of one seed are paired; `teamrl.study.seed_run`). Results go to
OUT/results.json, row by row as they finish, each with its cell digest (`teamrl.study.cells`): a
re-run skips finished cells, lists the rest with an ETA, refuses a folder whose cells were made with
another config, and re-runs one cell to check a folder whose cells were made at another code digest.
Every command that runs cells adds an entry to `commands` (`teamrl.study.provenance`).
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Any

from teamrl.config import ConfigError
from teamrl.study import cells, flow_rows, hetero_rows, provenance, results_file, scale_rows
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
    accept_code: bool = False,
) -> Path:
    """Every row over every seed; writes OUT/results.json after each row.

    A results.json already in OUT (same study and overrides) is continued: its (row, seed) results are
    kept and not rerun, so a stopped study resumes and a long table can be run a few rows per command.
    Several processes may run other seeds into the same OUT at once (`teamrl study --jobs`): each row's
    result is merged into the file under a lock. dry_run: check the folder and list what remains, run nothing.
    accept_code: accept finished cells made at another code digest without re-running one to check them.
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
        **({"planned_bound": study.bound} if study.bound is not None else {}),
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
    other_code = cells.check_cells(target, results["results"], digests, log, results.get("code_checks"))
    todo_cells = [(row.key, seed) for seed in protocol.seeds for row in rows if (row.key, seed) not in done]
    for line in cells.remaining(todo_cells, results["results"], cells.planned_seconds(study)):
        log(line)
    if dry_run:
        for code, keys in sorted(other_code.items()):
            again = cells.recheck_cell(keys, results["results"])
            log(
                f"{len(keys)} finished cell(s) were made at code {code}: a run re-runs {again[0]} seed {again[1]} to check them"
            )
        return target
    for code, keys in sorted(other_code.items()):
        check = _code_check(study, protocol, out, overrides, results, code, keys, digests, log, verbose, accept_code)
        results = results_file.update(target, fresh, partial(_append, key="code_checks", item=check))
        if not check["accepted"]:
            raise ConfigError(_refusal(target, check))
    entry = provenance.command_entry(list(protocol.seeds), [row.key for row in rows], cells.code_digest())
    results_file.update(target, fresh, partial(_append, key="commands", item=entry))
    command_started = time.time()

    def note_command(results: dict[str, Any]) -> None:
        mine = next(c for c in results["commands"] if (c["pid"], c["started"]) == (entry["pid"], entry["started"]))
        mine["wall_s"] = time.time() - command_started
        mine["cells_run"] += 1

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
            made = digests[(row.key, seed)]
            record = seed_run.run(row) | {
                "digest": {"config": made["config"], "code": made["code"]},
                "settings": made["settings"],
            }
            now = results_file.update(target, fresh, partial(results_file.add_record, record=record))
            results_file.update(target, fresh, note_command)
            todo_cells.remove((row.key, seed))
            if todo_cells:  # the ETA again, now with this cell's measured time
                log(cells.remaining(todo_cells, now["results"], cells.planned_seconds(study))[0])
    return target


def _append(results: dict[str, Any], key: str, item: dict[str, Any]) -> None:
    results.setdefault(key, []).append(item)


def _code_check(
    study: Study,
    protocol: Protocol,
    out: Path,
    overrides: list[str],
    results: dict[str, Any],
    code: str,
    keys: list[tuple[str, int]],
    digests: dict[tuple[str, int], dict[str, Any]],
    log: Log,
    verbose: bool,
    accept_code: bool,
) -> dict[str, Any]:
    """Re-run one of the cells made at `code` (in OUT/code-check/, the folder's runs untouched) and compare
    its result with the recorded one; the check as recorded in results.json (`accepted` says the verdict)."""
    row, seed = cells.recheck_cell(keys, results["results"])
    now = digests[(row, seed)]["code"]
    check: dict[str, Any] = {
        "code": code,
        "now": now,
        "cells": len(keys),
        "covers": {f"{r}/{s}": digests[(r, s)]["config"] for r, s in keys},
        "cell": [row, seed],
        "commit": provenance.commit()["commit"],
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if accept_code:
        log(f"{len(keys)} cell(s) made at code {code} accepted at code {now} without a check (--accept-code)")
        return check | {"accepted": True, "how": "--accept-code, not re-run"}
    log(f"{len(keys)} finished cell(s) were made at code {code}, now {now}: re-running {row} seed {seed} to check them")
    recorded = next(r for r in results["results"] if (r["row"], r["seed"]) == (row, seed))
    scratch = out / "code-check" / f"{code}-{now}"
    seed_run = SeedRun(study, protocol, seed, scratch, overrides, log, verbose, ROW_KINDS)
    seed_run.trained.update(
        {r["row"]: Path(r["run_dir"]) for r in results["results"] if r["seed"] == seed and r.get("run_dir")}
    )
    rerun = json.loads(json.dumps(seed_run.run(ROWS[row])))  # as results.json would hold it
    differing = cells.differing_fields(recorded, rerun)
    shown = {f: (_field(recorded, f), _field(rerun, f)) for f in differing[:3]}
    parted = cells.bit_difference(recorded, rerun)
    if differing:
        how = "re-run differs"
    elif parted is not None:
        how = "equal results, not the same run"
    elif recorded.get("fingerprints"):
        how = "re-run bit-identical"
    else:
        how = "re-run equal (results only: the recorded cell has no fingerprints)"
    log(
        f"code check: {row} seed {seed}: {how}"
        + (f" ({', '.join(differing)})" if differing else "")
        + (f"; {parted}" if parted else "")
    )
    return check | {
        "accepted": not differing and parted is None,
        "how": how,
        "differing": differing,
        "parted": parted,
        "shown": {f: {"recorded": a, "rerun": b} for f, (a, b) in shown.items()},
        "seconds": rerun.get("seconds"),
    }


def _field(record: Any, dotted: str) -> Any:
    for part in dotted.split(".") if dotted else ():
        record = record[int(part)] if isinstance(record, list) else record.get(part)
    return record


def _refusal(target: Path, check: dict[str, Any]) -> str:
    row, seed = check["cell"]
    if not check["differing"]:  # equal results from runs that parted
        return (
            f"{target}: {check['cells']} finished cell(s) were made at code digest {check['code']}; re-running "
            f"{row} seed {seed} at code {check['now']} gave the recorded results from another run ({check['parted']}). "
            f"Other cells of the folder may not be equal: start a fresh folder (--out OTHER_DIR), or run the code "
            f"that made them (a worktree at the folder's commit, results.json 'commands'; on another CPU the "
            f"arithmetic itself may differ), or pass --accept-code to keep the old cells beside new ones knowingly"
        )
    shown = "; ".join(f"{f}: recorded {v['recorded']}, now {v['rerun']}" for f, v in check["shown"].items())
    return (
        f"{target}: {check['cells']} finished cell(s) were made at code digest {check['code']}; re-running "
        f"{row} seed {seed} at code {check['now']} gave another result ({shown}; fields differing: "
        f"{', '.join(check['differing'])}). This code changes the table's results: start a fresh folder "
        f"(--out OTHER_DIR), or run the code that made them (a worktree at the folder's commit, results.json "
        f"'commands'), or pass --accept-code to keep the old cells beside new ones knowingly"
    )


def _digests(
    study: Study, protocol: Protocol, rows: list[Row], results: dict[str, Any], out: Path, overrides: list[str]
) -> dict[tuple[str, int], dict[str, Any]]:
    """(row, seed) -> this command's cell digest (config, code) and settings, for every cell it may run and
    every finished one."""
    wanted = {(row.key, seed) for row in rows for seed in protocol.seeds}
    wanted |= {(r["row"], r["seed"]) for r in results["results"] if r["row"] in ROWS}
    settings = vars(protocol)
    digests = {}
    for key, seed in sorted(wanted):
        config = row_config(study, protocol, ROWS[key].overrides, seed, out, f"{key}-s{seed}", overrides)
        digests[(key, seed)] = {
            **cells.cell_digest(config, settings),
            "settings": cells.cell_settings(config, settings),
        }
    return digests


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
