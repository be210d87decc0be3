"""The alerts scored as detectors over the trained runs of a `teamrl study workflows_calc` results file.

Each alert predicts an outcome (`run_outcomes`), judged per unit:
  collapse, echo_chamber -> cliff        per run: held-out success ended CLIFF_DROP below its peak;
  echo_chamber           -> errors coincide  per run of a workflow with a picker over duplicated answerers
                                         (voting, orchestrator-workers): on the test episodes a right answer
                                         was offered COINCIDE_GAP less often than independent answerers of
                                         the same accuracy would offer one (`run_outcomes.errors_coincide`);
  dominant_role          -> adherence    per (run, role of a shared multi-role policy): that role's
                                         format adherence or job accuracy fell ADHERENCE_DROP (subject
                                         'top>other' names the role it says is drifting: other);
  stalled_role           -> no gain      per (run, role): the role's test accuracy rose by at most
                                         NO_GAIN over the untrained base's.
A unit is a true positive when its alert fired (at any step) and the outcome happened. Lead time is the
outcome's onset minus the step the alert first fired (positive: the alert came first); the no-gain outcome
is measured once, at test time, so it has none.

Alerts never change training, so every threshold setting is scored by replaying each run's metrics
(`teamrl.report.alert_replay`). Thresholds are tuned on some seeds (the grid's best F1, ties to the
default) and reported on the others:

    python -m teamrl.study.alert_scores OUT/results.json --tune-seeds 0
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from teamrl.config import DiagnosticsConfig
from teamrl.diagnostics.alerts import Alert
from teamrl.report.alert_replay import replay_alerts
from teamrl.report.runs import load_metrics
from teamrl.study.run_outcomes import (
    ADHERENCE_DROP,
    adherence_fall,
    adherence_onset,
    cliff,
    duplicated_agents,
    errors_coincide,
    logged_roles,
    shared_roles,
)

NO_GAIN = 0.02
"""A role did not learn when its test accuracy rose by at most this much over the untrained base's."""

SCORED = (
    ("collapse", "cliff"),
    ("echo_chamber", "cliff"),
    ("echo_chamber", "errors coincide"),
    ("dominant_role", "adherence"),
    ("stalled_role", "no gain"),
)
"""(alert, the outcome it is scored against)."""
RUN_OUTCOMES = ("cliff", "errors coincide")
"""Outcomes judged once per run (the others per role)."""

CANDIDATES: dict[str, dict[str, tuple[float, ...]]] = {
    "collapse": {"collapse_drop": (0.1, 0.15, 0.2, 0.25)},
    "echo_chamber": {"echo_cosine": (0.5, 0.6, 0.7, 0.8, 0.9), "diversity_drop": (0.1, 0.2, 0.3)},
    "dominant_role": {"dominant_share": (0.4, 0.5, 0.6, 0.7), "format_drop": (0.1, 0.2, 0.3)},
    "stalled_role": {"stall_adv": (1e-3, 1e-2, 3e-2, 1e-1)},
}
"""Each alert's thresholds tried when tuning (every combination)."""


def grid(kind: str) -> list[tuple[str, ...]]:
    """The settings tried for one alert as override tuples, `DiagnosticsConfig`'s defaults first (ties
    go to them)."""
    names = list(CANDIDATES[kind])
    defaults = tuple(getattr(DiagnosticsConfig(), n) for n in names)
    combos = [defaults] + [c for c in itertools.product(*CANDIDATES[kind].values()) if c != defaults]
    return [tuple(f"diagnostics.{n}={v}" for n, v in zip(names, combo)) for combo in combos]


GRIDS: dict[str, list[tuple[str, ...]]] = {kind: grid(kind) for kind in CANDIDATES}


@dataclass
class Case:
    """One trained cell of the matrix, with the outcomes that happened in it."""

    seed: int
    row: str
    workflow: str
    regime: str
    run_dir: Path
    outcomes: dict[str, dict[str, bool]] = field(default_factory=dict)
    """outcome -> unit -> happened ('run' for the per-run cliff, a role name otherwise)."""
    onsets: dict[str, dict[str, int]] = field(default_factory=dict)
    """outcome -> unit -> step it began (cliff, adherence)."""


def case_of(seed: int, row: str, workflow: str, regime: str, cell: dict[str, Any], untrained: dict[str, Any]) -> Case:
    run_dir = Path(cell["run_dir"])
    rows = load_metrics(run_dir / "metrics.jsonl")
    case = Case(seed, row, workflow, regime, run_dir)
    found = cliff([tuple(p) for p in cell["curve"]])
    case.outcomes["cliff"] = {"run": found is not None}
    case.onsets["cliff"] = {"run": found.onset} if found else {}
    falls = {role: adherence_fall(rows, role) for role in shared_roles(rows)}
    case.outcomes["adherence"] = {r: f >= ADHERENCE_DROP - 1e-12 for r, f in falls.items() if f is not None}
    case.onsets["adherence"] = {r: s for r in case.outcomes["adherence"] if (s := adherence_onset(rows, r)) is not None}
    before, after = untrained.get("roles", {}), cell.get("roles", {})
    case.outcomes["no gain"] = {r: after[r] - before[r] <= NO_GAIN for r in after if r in before and "/" not in r}
    case.onsets["no gain"] = {}
    coincide = errors_coincide(after, duplicated_agents(rows, logged_roles(rows)))
    case.outcomes["errors coincide"] = {} if coincide is None else {"run": coincide}
    case.onsets["errors coincide"] = {}
    return case


def cases(results: dict[str, Any]) -> list[Case]:
    """Every trained cell of every `flows` row in a results file."""
    out = []
    for record in results["results"]:
        if "cells" not in record:
            continue
        for workflow, cells in record["cells"].items():
            for regime, cell in cells.items():
                if regime != "untrained" and "run_dir" in cell:
                    out.append(case_of(record["seed"], record["row"], workflow, regime, cell, cells["untrained"]))
    if not out:
        raise ValueError("no trained flows cells in these results: run `teamrl study workflows_calc` first")
    return out


def fired_units(alerts: list[Alert], kind: str, outcome: str) -> dict[str, int]:
    """unit -> first step an alert of `kind` fired about it (the unit of `outcome`)."""
    out: dict[str, int] = {}
    for alert in alerts:
        if alert.kind != kind:
            continue
        unit = (
            "run"
            if outcome in RUN_OUTCOMES
            else alert.subject.split(">", 1)[1]
            if kind == "dominant_role"
            else alert.subject
        )
        out.setdefault(unit, alert.step)
    return out


@dataclass(frozen=True)
class Score:
    kind: str
    outcome: str
    setting: tuple[str, ...]
    tp: int
    fp: int
    fn: int
    tn: int
    leads: tuple[int, ...]

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def base_rate(self) -> float | None:
        """The share of units where the outcome happened: what an alert firing at random would reach in precision."""
        n = self.tp + self.fp + self.fn + self.tn
        return (self.tp + self.fn) / n if n else None

    @property
    def f1(self) -> float:
        p, r = self.precision or 0.0, self.recall or 0.0
        return 2 * p * r / (p + r) if p + r else 0.0


def score(
    kind: str,
    outcome: str,
    setting: tuple[str, ...],
    chosen: list[Case],
    replayed: dict[tuple[Path, tuple[str, ...]], list[Alert]],
) -> Score:
    tp = fp = fn = tn = 0
    leads = []
    for case in chosen:
        fired = fired_units(replayed[(case.run_dir, setting)], kind, outcome)
        for unit, happened in case.outcomes[outcome].items():
            alerted = unit in fired
            tp, fp, fn, tn = (
                tp + (alerted and happened),
                fp + (alerted and not happened),
                fn + (happened and not alerted),
                tn + (not alerted and not happened),
            )
            if alerted and happened and unit in case.onsets[outcome]:
                leads.append(case.onsets[outcome][unit] - fired[unit])
    return Score(kind, outcome, setting, tp, fp, fn, tn, tuple(leads))


def replay_all(all_cases: list[Case]) -> dict[tuple[Path, tuple[str, ...]], list[Alert]]:
    """Every run's alerts under every setting of every grid (alerts never change training)."""
    settings = {s for grid in GRIDS.values() for s in grid}
    return {(case.run_dir, s): replay_alerts(case.run_dir, list(s)) for case in all_cases for s in settings}


def evaluate(results: dict[str, Any], tune_seeds: set[int]) -> list[dict[str, Any]]:
    """Per alert: its score on the held-out seeds with the default thresholds and with the thresholds
    tuned on `tune_seeds`."""
    all_cases = cases(results)
    held = [c for c in all_cases if c.seed not in tune_seeds]
    tune = [c for c in all_cases if c.seed in tune_seeds]
    if not held or not tune:
        raise ValueError(
            f"tune seeds {sorted(tune_seeds)} must leave some seeds of "
            f"{sorted({c.seed for c in all_cases})} on each side"
        )
    replayed = replay_all(all_cases)
    out = []
    for kind, outcome in SCORED:
        grid = GRIDS[kind]
        tuned = max(grid, key=lambda s: (score(kind, outcome, s, tune, replayed).f1, s == grid[0]))
        out.append(
            {
                "kind": kind,
                "predicts": outcome,
                "tuned": tuned,
                "default": score(kind, outcome, grid[0], held, replayed),
                "held_out_tuned": score(kind, outcome, tuned, held, replayed),
                "tune_fit": score(kind, outcome, tuned, tune, replayed),
            }
        )
    return out


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def table(scored: list[dict[str, Any]]) -> str:
    lines = [
        "| alert | predicts | thresholds | TP | FP | FN | TN | base rate | precision | recall | lead (steps) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in scored:
        for label, s in (("default", entry["default"]), ("tuned", entry["held_out_tuned"])):
            lead = f"{fmean(s.leads):+.1f} (min {min(s.leads)}, max {max(s.leads)})" if s.leads else "—"
            setting = ", ".join(x.split(".", 1)[1] for x in s.setting)
            lines.append(
                f"| {entry['kind']} ({label}) | {entry['predicts']} | {setting} | {s.tp} | {s.fp} | "
                f"{s.fn} | {s.tn} | {_percent(s.base_rate)} | {_percent(s.precision)} | {_percent(s.recall)} | {lead} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--tune-seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args(argv)
    print(table(evaluate(json.loads(args.results.read_text()), set(args.tune_seeds))))


if __name__ == "__main__":
    main()
