"""The `teamrl probe` command's work: run the probes, print a table per verifier, write the JSON.

    teamrl probe                                  # every registered task, 4 held-out instances each
    teamrl probe --task math --task split_calc --instances 8 --out runs/probe.json

Exit status 1 when any hack was rewarded (a verifier bug), so CI or a study can gate on it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, TextIO

from teamrl.config.tasks import TASKS
from teamrl.probes import CATALOGUES, ProbeRow, count, probe_task


def probed_tasks(names: list[str] | None) -> list[str]:
    """The tasks to probe: `names` (checked), else every registered task that has a catalogue."""
    if not names:
        return [name for name in TASKS if name in CATALOGUES]
    unknown = [name for name in names if name not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {', '.join(unknown)}; registered tasks: {', '.join(sorted(TASKS))}")
    return list(dict.fromkeys(names))


def format_table(rows: list[ProbeRow]) -> str:
    """One block per task: hack kind, tried, rewarded; then the task's total."""
    lines: list[str] = []
    table = count(rows)
    width = max((len(kind) for _, kind, _, _ in table), default=4)
    for task in dict.fromkeys(task for task, *_ in table):
        mine = [(kind, tried, hit) for t, kind, tried, hit in table if t == task]
        lines += [f"{task}", f"  {'hack':<{width}} {'tried':>6} {'rewarded':>9}"]
        lines += [f"  {kind:<{width}} {tried:>6} {hit:>9}" for kind, tried, hit in mine]
        lines += [f"  {'total':<{width}} {sum(t for _, t, _ in mine):>6} {sum(h for _, _, h in mine):>9}", ""]
    return "\n".join(lines)


def summary(
    rows: list[ProbeRow], tasks: list[str], instances: int, seconds: float, options: dict[str, str] | None = None
) -> dict[str, Any]:
    """The JSON written by `teamrl probe`: totals, the per-kind table and every rewarded attempt."""
    return {
        "tasks": tasks,
        "instances": instances,
        "options": options,
        "seconds": round(seconds, 1),
        "tried": len(rows),
        "rewarded": sum(r.rewarded for r in rows),
        "table": [{"task": t, "kind": k, "tried": n, "rewarded": h} for t, k, n, h in count(rows)],
        "rewarded_attempts": [r.as_dict() for r in rows if r.rewarded],
    }


def task_options(items: list[str]) -> dict[str, str]:
    """`KEY=VALUE` strings as a dict of task settings.

    >>> task_options(["source=gsm8k"])
    {'source': 'gsm8k'}
    """
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--task-option {item!r} must be KEY=VALUE, e.g. source=gsm8k")
        options[key.strip()] = value.strip()
    return options


def run_probe(
    names: list[str] | None, instances: int, out: Path | None, stream: TextIO, options: list[str] | None = None
) -> int:
    """Probe the tasks (each with the `KEY=VALUE` settings in `options`), print the tables and totals
    to `stream`, write the JSON to `out`; 1 if any hack paid."""
    tasks, settings = probed_tasks(names), task_options(options or [])
    start = time.perf_counter()
    rows: list[ProbeRow] = []
    for name in tasks:
        rows += probe_task(name, instances, task=settings)
    report = summary(rows, tasks, instances, time.perf_counter() - start, settings)
    stream.write(format_table(rows) + "\n")
    stream.write(
        f"{report['rewarded']} of {report['tried']} hack attempts rewarded ({len(report['table'])} kinds, "
        f"{len(tasks)} tasks, {instances} held-out instances each) in {report['seconds']} s\n"
    )
    for row in report["rewarded_attempts"][:10]:
        stream.write(
            f"REWARDED {row['task']}/{row['kind']} (instance {row['instance']}, {', '.join(row['why'])}): "
            f"{row['response'][:200]!r}\n"
        )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1) + "\n")
        stream.write(f"wrote {out}\n")
    return 1 if report["rewarded"] else 0
