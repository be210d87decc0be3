"""A study's cells across sessions: each (row, seed) result carries a digest of what decided it.

A cell's digest has two parts:
  config: the row's resolved run config at that seed (the study's settings, the user's overrides and
          the row's own, as `teamrl train` would get them; the output folder left out, so a moved
          folder still continues) and the protocol's split sizes;
  code:   the source of the packages whose code decides a result (`CODE_PACKAGES`: tasks, workflows,
          rollout, algorithms, setup, training, policies, config, demos, the diagnostics' per-role gradient
          tracking, the study's runner and rows), not of the modules that only report (`REPORT_ONLY`) or
          only measure (`MEASURE_ONLY`).
A folder is continued only where every finished cell's config digest is what this command would make
now; otherwise the command stops and names the cell (mixing a table from two configs would compare rows
that were not made alike). A code digest that differs does not refuse by itself: most commits leave a
cell's run bit-identical. On continuing a folder whose cells were made at another code digest, the
study re-runs one finished cell of each such code (`recheck_cell`: the cheapest cell that trains) and
compares its result field by field (`differing_fields`) and its training runs bit for bit (`bit_difference`:
each step's sampled tokens and log-probs, and the final weights, `teamrl.training.fingerprint`); a
re-run equal in both accepts that code's cells (the check is recorded in results.json, `code_checks`).
Any difference stops the command with the cell and what differs named: equal results from runs that
parted somewhere are results of a nearly identical run, and other cells of the folder may not be equal.
A recorded cell without fingerprints (made before they existed) is checked on its results only, and the
check says so. `--accept-code` accepts without the check (recorded as such). Records written before
digests existed are kept, unchecked.

The cells still to run are listed with an ETA: each priced at the mean measured seconds of its row's
finished cells, else the study's planned price (`teamrl.study.real_budget`) times the folder's measured
over planned seconds on its finished cells (`planned_scale`), else the mean of every finished cell.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from statistics import mean
from typing import Any

from teamrl.config import ConfigError, RunConfig
from teamrl.config.run import config_to_dict
from teamrl.study import real_budget
from teamrl.study.rows import ROWS, Row, Study, named_model
from teamrl.training.fingerprint import first_difference

CODE_PACKAGES = (
    "teamrl.tasks",
    "teamrl.workflows",
    "teamrl.rollout",
    "teamrl.algorithms",
    "teamrl.setup",
    "teamrl.training",
    "teamrl.policies",
    "teamrl.config",
    "teamrl.demos",
    "teamrl.diagnostics",  # the per-role backward and coherence damping (gradients.py) shape the update
    "teamrl.study",
)
MEASURE_ONLY = frozenset({"alerts.py", "diversity.py", "drift.py", "rollout.py", "transcripts.py"})
"""Diagnostics modules that only compute logged metrics or print alerts (alerts never change training)."""
REPORT_ONLY = frozenset(
    {
        "table.py",
        "flow_report.py",
        "alert_scores.py",
        "cells.py",
        "command.py",
        "scale_report.py",
        "progress.py",
        "provenance.py",
        "power_plan.py",
    }
)
"""Study modules that write pages, list cells or parse the command line: no result depends on them."""


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over the source files of `CODE_PACKAGES` (path and content, in a fixed order)."""
    digest = hashlib.sha256()
    for package in CODE_PACKAGES:
        module_file = importlib.import_module(package).__file__
        assert module_file is not None  # CODE_PACKAGES are regular packages, each with an __init__.py
        folder = Path(module_file).parent
        skipped = {"teamrl.study": REPORT_ONLY, "teamrl.diagnostics": MEASURE_ONLY}.get(package, frozenset())
        for path in sorted(folder.rglob("*.py")):
            if path.name in skipped:
                continue
            digest.update(f"{package}/{path.relative_to(folder)}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def config_digest(config: RunConfig, protocol: dict[str, Any]) -> str:
    """sha256 of the resolved config (output folder aside) and the protocol's settings (seeds aside: the
    config holds the cell's own seed)."""
    settings = {k: v for k, v in config_to_dict(config).items() if k != "output_dir"}
    sizes = {k: v for k, v in protocol.items() if k != "seeds"}
    text = json.dumps({"config": settings, "protocol": sizes}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cell_digest(config: RunConfig, protocol: dict[str, Any]) -> dict[str, str]:
    return {"config": config_digest(config, protocol), "code": code_digest()}


def cell_settings(config: RunConfig, protocol: dict[str, Any]) -> dict[str, Any]:
    """What `config_digest` hashes, flattened to dotted fields (JSON values), so a later command can name
    the fields that differ and tell a changed setting from a field a later code added."""
    settings = {k: v for k, v in config_to_dict(config).items() if k != "output_dir"}
    sizes = {k: v for k, v in protocol.items() if k != "seeds"}
    flat: dict[str, Any] = {}

    def walk(value: Any, at: str) -> None:
        if isinstance(value, dict) and value:
            for key, inner in value.items():
                walk(inner, f"{at}.{key}" if at else str(key))
        else:
            flat[at] = json.loads(json.dumps(value, default=str))

    walk({"config": settings, "protocol": sizes}, "")
    return flat


def setting_changes(recorded: dict[str, Any], now: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(fields whose value changed or that are gone, fields only `now` has: added by a later code).

    >>> setting_changes({"config.a": 1, "config.b": 2}, {"config.a": 1, "config.b": 3, "config.c": 0})
    (['config.b'], ['config.c'])
    """
    changed = sorted(k for k in recorded if k not in now or recorded[k] != now[k])
    return changed, sorted(k for k in now if k not in recorded)


def check_cells(
    target: Path,
    records: list[dict[str, Any]],
    now: dict[tuple[str, int], dict[str, Any]],
    log: Any = print,
    checks: list[dict[str, Any]] | None = None,
) -> dict[str, list[tuple[str, int]]]:
    """Refuse a folder any finished cell of which was made with other settings than `now`'s; return the
    cells made at another code digest (or with fields a later code added) that no recorded check
    (`checks`, each listing the cells it covers) accepted for this code, by the code that made them.

    now: (row, seed) -> the digest this command makes for that cell (every finished cell's included)."""
    unchecked = []
    other_code: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for record in records:
        key = (record["row"], record["seed"])
        made = record.get("digest")
        if made is None:
            unchecked.append(key)
            continue
        if key not in now:
            continue  # a row this version of the study no longer has: the table shows it as it was
        config_differs = made.get("config") != now[key]["config"]
        if config_differs:
            _check_settings(target, key, made, record.get("settings"), now[key])
        code = made.get("code", "?")
        covered = any(
            c.get("accepted")
            and c["now"] == now[key]["code"]
            and c.get("covers", {}).get(f"{key[0]}/{key[1]}") == now[key]["config"]
            for c in checks or ()
        )
        if (code != now[key]["code"] or config_differs) and not covered:
            other_code[code].append(key)
    if unchecked:
        log(
            f"{len(unchecked)} finished cell(s) have no digest (written before digests); kept unchecked: "
            f"{', '.join(f'{r} seed {s}' for r, s in unchecked)}"
        )
    return dict(other_code)


def _check_settings(
    target: Path, key: tuple[str, int], made: dict[str, str], recorded: dict[str, Any] | None, now: dict[str, Any]
) -> None:
    """Refuse a cell whose config digest differs, unless its recorded settings show only fields a later code
    added (their effect is then checked like a code change's, by a re-run)."""
    fix = "Start a fresh folder (--out OTHER_DIR), or run the code and settings that made it (results.json 'commands')"
    if recorded is None or "settings" not in now:
        raise ConfigError(
            f"{target}: cell {key[0]} seed {key[1]} was made with another config (config digest "
            f"{made.get('config', '?')}, now {now['config']}; the cell records no settings to compare field by "
            f"field); its result cannot be mixed with this command's. {fix}"
        )
    changed, _ = setting_changes(recorded, now["settings"])
    if changed:
        shown = "; ".join(
            f"{f}: {recorded.get(f, '(absent)')} -> {now['settings'].get(f, '(absent)')}" for f in changed[:5]
        )
        raise ConfigError(
            f"{target}: cell {key[0]} seed {key[1]} was made with another config ({shown}"
            f"{'; ...' if len(changed) > 5 else ''}); its result cannot be mixed with this command's. {fix}"
        )


TRAINING_KINDS = frozenset({"train", "alone", "sft", "bases", "flows", "scale"})
"""Row kinds whose cell runs an update: re-running one checks the training code, not only sampling."""
VOLATILE_FIELDS = frozenset(
    {"seconds", "digest", "settings", "run_dir", "run_bases", "transcripts", "label", "fingerprints"}
)
"""Record fields that say how long or where, not what, left out of a re-run's comparison of results; and
the runs' fingerprints, compared on their own (`bit_difference`)."""


def bit_difference(recorded: dict[str, Any], rerun: dict[str, Any]) -> str | None:
    """Where a re-run cell's training runs part from the recorded ones, bit for bit, in words; None when
    every run is the same run (equal sampled tokens, log-probs and final weights). A record without
    fingerprints (made before they existed, or a row that trains nothing) has nothing to compare: None.
    """
    made, again = recorded.get("fingerprints") or {}, rerun.get("fingerprints") or {}
    if not made:
        return None
    for name in sorted(set(made) | set(again)):
        if name not in made or name not in again:
            return f"run {name} is in only one of them"
        where = first_difference(made[name], again[name])
        if where is not None:
            return f"run {name}: {where}"
    return None


def recheck_cell(candidates: list[tuple[str, int]], records: list[dict[str, Any]]) -> tuple[str, int]:
    """The cell to re-run among `candidates`: the cheapest (recorded seconds) whose row trains, else the
    cheapest; ties by row order, then seed, so every command picks the same cell."""
    seconds = {(r["row"], r["seed"]): float(r.get("seconds", 0.0)) for r in records}
    order = {key: i for i, key in enumerate(ROWS)}

    def rank(key: tuple[str, int]) -> tuple[bool, float, int, int]:
        trains = key[0] in ROWS and ROWS[key[0]].kind in TRAINING_KINDS
        return (not trains, seconds.get(key, 0.0), order.get(key[0], len(order)), key[1])

    return min(candidates, key=rank)


def differing_fields(recorded: Any, rerun: Any, at: str = "") -> list[str]:
    """The fields (dotted paths) where a re-run's result differs from the recorded one, exactly; volatile
    fields (`VOLATILE_FIELDS`) and file paths (strings from '/') are left out.

    >>> differing_fields({"test_success": 0.5, "seconds": 3, "curve": [[0, 0.1]]}, {"test_success": 0.5, "curve": [[0, 0.2]]})
    ['curve.0.1']
    """
    if isinstance(recorded, dict) and isinstance(rerun, dict):
        out = []
        for key in sorted(set(recorded) | set(rerun), key=str):
            if key in VOLATILE_FIELDS:
                continue
            where = f"{at}.{key}" if at else str(key)
            if key not in recorded or key not in rerun:
                out.append(where)
            else:
                out += differing_fields(recorded[key], rerun[key], where)
        return out
    if isinstance(recorded, list) and isinstance(rerun, list):
        if len(recorded) != len(rerun):
            return [at]
        return [f for i, (x, y) in enumerate(zip(recorded, rerun)) for f in differing_fields(x, y, f"{at}.{i}")]
    if isinstance(recorded, str) and isinstance(rerun, str) and recorded.startswith("/") and rerun.startswith("/"):
        return []
    return [] if recorded == rerun else [at]


def planned_seconds(study: Study) -> dict[str, float]:
    """row -> the study's planned seconds of one cell (empty for a study without a budget)."""
    b = study.budget
    if b is None:
        return {}
    scales = {row.key: _model_of(row, study) for row in ROWS.values() if row.kind == "scale"}
    planned = {
        **real_budget.main_table_seed_s(b),
        **real_budget.hetero_table_seed_s(b),
        **real_budget.scale_table_seed_s(b, scales),
    }
    return {key: seconds for key, seconds in planned.items() if key in study.rows}


def _model_of(row: Row, study: Study) -> str:
    """The model a scale row runs (the study's substitute wins), priced as SmolLM2 when unknown."""
    named = study.model or named_model(row.overrides)
    return named if named in real_budget.MODEL_COST else "smollm2-135m-instruct"


def remaining(todo: list[tuple[str, int]], records: list[dict[str, Any]], planned: dict[str, float]) -> list[str]:
    """Lines listing the cells still to run, each with its expected seconds and where that came from,
    after a first line with their count and the ETA."""
    measured: dict[str, list[float]] = defaultdict(list)
    for record in records:
        if "seconds" in record:
            measured[record["row"]].append(float(record["seconds"]))
    overall = mean(s for v in measured.values() for s in v) if measured else None
    scale = planned_scale(measured, planned)
    lines, total, unknown = [], 0.0, 0
    for row, seed in todo:
        if measured.get(row):
            seconds, source = mean(measured[row]), f"measured, {len(measured[row])} cell(s)"
        elif row in planned and scale is not None:
            seconds, source = planned[row] * scale, f"planned x {scale:.1f}, this folder's measured / planned"
        elif row in planned:
            seconds, source = planned[row], "planned"
        elif overall is not None:
            seconds, source = overall, "mean of finished cells"
        else:
            seconds, source = None, "no measurement"
        if seconds is None:
            unknown += 1
            lines.append(f"  {row} seed {seed}: ? ({source})")
        else:
            total += seconds
            lines.append(f"  {row} seed {seed}: ~{duration(seconds)} ({source})")
    eta = f"ETA ~{duration(total)}" + (f" + {unknown} cell(s) not priced" if unknown else "")
    head = (
        f"{len(todo)} cell(s) to run, {len(records)} finished; {eta}"
        if todo
        else f"every cell finished ({len(records)})"
    )
    return [head, *lines]


def planned_scale(measured: dict[str, list[float]], planned: dict[str, float]) -> float | None:
    """This folder's measured seconds over the planned ones, summed over its finished cells of planned rows
    (None when it has none). The plan prices an episode from Split-Calc's short answers; a task whose
    answers or episodes run longer (the code team's 160-token programs and three rounds) costs a multiple
    of it, and the finished cells of the same folder measure that multiple for the rows not run yet."""
    pairs = [(sum(seconds), len(seconds) * planned[row]) for row, seconds in measured.items() if row in planned]
    spent, priced = sum(s for s, _ in pairs), sum(p for _, p in pairs)
    return spent / priced if priced > 0 else None


def duration(seconds: float) -> str:
    """'1h 05m', '12m', '40s'.

    >>> duration(3900), duration(720), duration(40)
    ('1h 05m', '12m', '40s')
    """
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = round(seconds / 60)
    return f"{minutes // 60}h {minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"
