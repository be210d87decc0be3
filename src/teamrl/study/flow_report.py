"""The report of `teamrl study workflows_calc`: the matrix with its late behaviour, the policy-sharing
paper's findings checked one by one, the mitigations with and without, and plots.

    python -m teamrl.study.flow_report OUT/results.json [--markdown FILE] [--plots DIR]

Per trained cell it reads the run's metrics.jsonl (the run folders the results file names):
  test best / final:  test success of the best checkpoint (picked on validation) and of the last one;
  peak, final:        validation success at its best and at the last evaluation;
  cliffs:             seeds whose validation curve ended `run_outcomes.CLIFF_DROP` below its peak;
  top share:          in a policy shared by several roles, the largest role's gradient share (run mean);
  dup cos:            mean pairwise gradient cosine of duplicated agents (run mean; voting, debate);
  diversity:          duplicated agents' output diversity, first steps -> last steps;
  adherence:          each role's format adherence, first steps -> last steps;
  job accuracy:       each role's accuracy at its job (verdict or answer; all candidates), first -> last.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from teamrl.report.plots import Line, Panel, save_figure
from teamrl.report.runs import load_metrics
from teamrl.study.protocol import Paired, paired, summarize
from teamrl.study.run_outcomes import (
    ADHERENCE_DROP,
    CLIFF_DROP,
    JOB_TERMS,
    adherence_keys,
    cliff,
    duplicated_agents,
    logged_roles,
    independent_offer,
    series_mean,
    start_end,
    training_series,
)

SEPARATE = ("per_role", "per_agent")
"""Regimes that give roles (or agents) policies of their own."""


@dataclass
class RunSummary:
    """One trained cell of one seed, summarized."""

    seed: int
    test: float
    test_final: float | None
    peak: float
    final: float
    best_step: int
    cliff: bool
    top_share: float | None
    top_role: str | None
    dup_cos: float | None
    diversity: tuple[float, float] | None
    adherence: dict[str, tuple[float, float]]
    job: dict[str, tuple[float, float]]
    curve: list[tuple[int, float]]
    series: dict[str, list[tuple[int, float]]]
    """'<stat>/<role>' -> its per-step values, for the stats in SERIES."""
    test_roles: dict[str, float] = field(default_factory=dict)
    """Each role's accuracy on the test episodes of the best checkpoint (`flow_rows.role_accuracy`)."""
    agents: dict[str, int] = field(default_factory=dict)
    """Duplicated roles: how many agents play each (agents named `<role>_<i>`)."""


SERIES = ("grad_share", "dup_grad_cos", "diversity", "format_ok", *JOB_TERMS)
"""Per-role diagnostics drawn over time."""


def run_folder(cell: dict[str, Any], base: Path | None = None) -> Path:
    """A trained cell's run folder: where the results file says, else `base/runs/<its name>` (a study
    folder copied or moved since it was run, e.g. into benchmarks/results)."""
    recorded = Path(cell["run_dir"])
    if recorded.is_dir() or base is None:
        return recorded
    moved = base / "runs" / recorded.name
    if not moved.is_dir():
        raise FileNotFoundError(
            f"run folder {recorded} is gone and {moved} does not exist: pass the study "
            "folder that holds runs/ (its metrics.jsonl files are read)"
        )
    return moved


def summarize_run(seed: int, cell: dict[str, Any], base: Path | None = None) -> RunSummary:
    rows = load_metrics(run_folder(cell, base) / "metrics.jsonl")
    curve = [(int(s), float(v)) for s, v in cell["curve"]]
    roles = logged_roles(rows)
    shares = {r: m for r in roles if (m := series_mean(rows, f"diag/role/{r}/grad_share")) is not None}
    top = max(shares, key=shares.__getitem__) if shares else None
    cos = [m for r in roles if (m := series_mean(rows, f"diag/role/{r}/dup_grad_cos")) is not None]
    diversity = [e for r in roles if (e := start_end(training_series(rows, f"diag/role/{r}/diversity")))]
    adherence = {r: e for r in roles if (e := start_end(training_series(rows, f"diag/role/{r}/format_ok")))}
    job = {
        r: e
        for r in roles
        for key in adherence_keys(rows, r)[-1:]
        if not key.endswith("/format_ok")
        if (e := start_end(training_series(rows, key)))
    }
    return RunSummary(
        seed,
        cell["test_success"],
        cell.get("test_final"),
        max(v for _, v in curve),
        curve[-1][1],
        int(cell["best_step"]),
        cliff(curve) is not None,
        None if top is None else shares[top],
        top,
        fmean(cos) if cos else None,
        (fmean(d[0] for d in diversity), fmean(d[1] for d in diversity)) if diversity else None,
        adherence,
        job,
        curve,
        {
            f"{stat}/{r}": points
            for stat in SERIES
            for r in roles
            if (points := training_series(rows, f"diag/role/{r}/{stat}"))
        },
        dict(cell.get("roles", {})),
        duplicated_agents(rows, roles),
    )


def collect(
    results: dict[str, Any], base: Path | None = None
) -> tuple[
    dict[tuple[str, str, str], list[RunSummary]],
    dict[tuple[str, str], dict[int, float]],
    dict[tuple[str, str], dict[int, dict[str, float]]],
]:
    """(row, workflow, cell) -> per-seed summaries of trained cells; (row, workflow) -> seed -> the untrained
    base's test success, and its per-role test accuracy. base: see `run_folder`."""
    trained: dict[tuple[str, str, str], list[RunSummary]] = defaultdict(list)
    untrained: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    untrained_roles: dict[tuple[str, str], dict[int, dict[str, float]]] = defaultdict(dict)
    for record in results["results"]:
        for workflow, cells in record.get("cells", {}).items():
            for name, cell in cells.items():
                if name == "untrained":
                    untrained[(record["row"], workflow)][record["seed"]] = cell["test_success"]
                    untrained_roles[(record["row"], workflow)][record["seed"]] = cell.get("roles", {})
                elif "run_dir" in cell:
                    trained[(record["row"], workflow, name)].append(summarize_run(record["seed"], cell, base))
    if not trained:
        raise ValueError("no trained flows cells in these results: run `teamrl study workflows_calc` first")
    return trained, untrained, untrained_roles


def _pct(values: list[float]) -> str:
    s = summarize(values)
    return f"{s.mean:.1%}" + ("" if s.std is None else f" ± {100 * s.std:.1f}")


def _mean_or_dash(values: list[float | None], fmt: str = "{:.2f}") -> str:
    kept = [v for v in values if v is not None]
    return fmt.format(fmean(kept)) if kept else "—"


def _span(pairs: list[tuple[float, float] | None]) -> str:
    kept = [p for p in pairs if p is not None]
    return f"{fmean(p[0] for p in kept):.2f} → {fmean(p[1] for p in kept):.2f}" if kept else "—"


def matrix_table(trained: dict, untrained: dict, row: str) -> str:
    lines = [
        "| workflow | cell | test (best ckpt) | test (last ckpt) | val peak → last | cliffs | best step | "
        "top role share | dup grad cos | diversity | format adherence | job accuracy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (r, workflow), seeds in untrained.items():
        if r != row:
            continue
        lines.append(f"| {workflow} | untrained | {_pct(list(seeds.values()))} | | | | | | | | | |")
        for (r2, w2, name), runs in trained.items():
            if (r2, w2) != (row, workflow):
                continue
            finals = [x.test_final for x in runs if x.test_final is not None]
            tops = {x.top_role for x in runs if x.top_role}
            roles = sorted({role for x in runs for role in x.adherence})
            adherence = "; ".join(f"{role} {_span([x.adherence.get(role) for x in runs])}" for role in roles)
            job = "; ".join(
                f"{role} {_span([x.job.get(role) for x in runs])}"
                for role in sorted({role for x in runs for role in x.job})
            )
            lines.append(
                f"| {workflow} | {name} | {_pct([x.test for x in runs])} | {_pct(finals) if finals else '—'} | "
                f"{fmean(x.peak for x in runs):.0%} → {fmean(x.final for x in runs):.0%} | "
                f"{sum(x.cliff for x in runs)}/{len(runs)} | {fmean(x.best_step for x in runs):.0f} | "
                f"{_mean_or_dash([x.top_share for x in runs], '{:.0%}')}{' (' + '/'.join(sorted(tops)) + ')' if tops else ''} | "
                f"{_mean_or_dash([x.dup_cos for x in runs])} | {_span([x.diversity for x in runs])} | {adherence or '—'} | {job or '—'} |"
            )
    return "\n".join(lines)


def _paired_text(result: Paired) -> str:
    d = result.diff
    interval = "" if d.low is None or d.high is None else f" [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"
    return f"{100 * d.mean:+.1f} points{interval} (ahead on {result.wins}, behind on {result.losses}, tied {result.ties} of {d.n})"


def _by(trained: dict, row: str, name: str, attr: str) -> dict[tuple[str, int], float]:
    return {
        (w, x.seed): getattr(x, attr)
        for (r, w, n), runs in trained.items()
        if r == row and n == name
        for x in runs
        if getattr(x, attr) is not None
    }


def _separate(trained: dict, row: str, attr: str) -> dict[tuple[str, int], float]:
    """Per (workflow, seed): the value of the first separate-policy cell the workflow has."""
    out: dict[tuple[str, int], float] = {}
    for name in SEPARATE:
        for key, value in _by(trained, row, name, attr).items():
            out.setdefault(key, value)
    return out


def findings(trained: dict, row: str, untrained_roles: dict | None = None) -> list[str]:
    """The policy-sharing paper's qualitative findings, each checked on this row's cells."""
    out = []
    shared_test, separate_test = _by(trained, row, "shared", "test"), _separate(trained, row, "test")
    shared_peak, separate_peak = _by(trained, row, "shared", "peak"), _separate(trained, row, "peak")
    if set(shared_test) & set(separate_test):
        out.append(
            "- **Separate policies peak higher than a shared one** (best checkpoint on test, separate − "
            f"shared, pooled over workflows and seeds): {_paired_text(paired(separate_test, shared_test))}; "
            f"validation peak: {_paired_text(paired(separate_peak, shared_peak))}."
        )
    runs = {
        n: [x for (r, _, n2), xs in trained.items() if r == row and n2 == n for x in xs] for n in ("shared", *SEPARATE)
    }
    sep = runs["per_role"] + runs["per_agent"]
    if runs["shared"] and sep:
        drop = {k: fmean(x.peak - x.final for x in v) for k, v in (("shared", runs["shared"]), ("separate", sep))}
        evaluations = min(len(x.curve) for x in runs["shared"] + sep)
        if evaluations < 3:  # a cliff is a fall after a peak: the first and last evaluations cannot show one
            out.append(
                f"- **Separate policies fall off late cliffs, shared ones are stable**: not measurable "
                f"({evaluations} validation evaluations a run)."
            )
        else:
            out.append(
                f"- **Separate policies fall off late cliffs, shared ones are stable**: cliffs (validation ends "
                f"≥ {CLIFF_DROP:.0%} below its peak) in {sum(x.cliff for x in sep)} of {len(sep)} separate-policy "
                f"runs and {sum(x.cliff for x in runs['shared'])} of {len(runs['shared'])} shared runs; mean drop "
                f"from peak to last evaluation {drop['separate']:.1%} vs {drop['shared']:.1%}."
            )
        for label, attr in (("format adherence", "adherence"), ("job accuracy", "job")):
            falls = {
                k: [a[0] - a[1] for x in v for a in getattr(x, attr).values()]
                for k, v in (("shared", runs["shared"]), ("separate", sep))
            }
            if falls["shared"] and falls["separate"]:
                out.append(
                    f"- **Shared policies quietly lose role adherence** ({label}, first steps → last, per "
                    f"role and run): mean fall {fmean(falls['shared']):+.2f} on shared policies vs "
                    f"{fmean(falls['separate']):+.2f} on separate ones (negative: it rose); fell by "
                    f"{ADHERENCE_DROP:.2f} or more in {sum(f >= ADHERENCE_DROP for f in falls['shared'])} of "
                    f"{len(falls['shared'])} (shared) vs {sum(f >= ADHERENCE_DROP for f in falls['separate'])} "
                    f"of {len(falls['separate'])} (separate)."
                )
    dup = [x for (r, w, n), xs in trained.items() if r == row and n == "shared" for x in xs if x.dup_cos is not None]
    alone = [
        x for (r, w, n), xs in trained.items() if r == row and n == "per_agent" for x in xs if x.diversity is not None
    ]
    if dup:
        fall = [x.diversity[0] - x.diversity[1] for x in dup if x.diversity]
        alone_fall = [x.diversity[0] - x.diversity[1] for x in alone]
        out.append(
            f"- **Duplicated roles amplify each other** (voting's generators, debate's debaters on one "
            f"policy): mean gradient cosine between duplicated agents {fmean(x.dup_cos for x in dup):.2f}; "
            f"their output diversity fell by {fmean(fall):+.2f} on a shared policy"
            + (f" and by {fmean(alone_fall):+.2f} with a policy per agent." if alone_fall else ".")
        )
    out += agreement(trained, row, untrained_roles)
    tops = [x for x in runs["shared"] if x.top_share is not None]
    if tops:
        out.append(
            f"- **One role dominates a shared policy**: the largest role's gradient share averaged "
            f"{fmean(x.top_share for x in tops):.0%} over the shared runs; at least 60% (the alert's "
            f"default) in {sum(x.top_share >= 0.6 for x in tops)} of {len(tops)} runs "
            f"(roles: {', '.join(sorted({x.top_role for x in tops}))})."
        )
    return out


def agreement(trained: dict, row: str, untrained_roles: dict | None = None) -> list[str]:
    """Whether duplicated answerers fail together: per cell of a workflow whose picker logs `<role>/offered`
    (voting's aggregator: a right answer was among the generators'), the answerers' test accuracy p, the
    share of episodes where a right answer was offered, and what n independent answerers of accuracy p
    would offer, 1 - (1 - p)^n. Offered far below that: their errors coincide (they echo each other).
    untrained_roles: (row, workflow) -> seed -> the untrained base's test role accuracy, shown first."""
    out = []
    workflows = dict.fromkeys(w for r, w, _ in trained if r == row)
    for workflow in workflows:
        cells = {n: runs for (r, w, n), runs in trained.items() if (r, w) == (row, workflow)}
        counts = {role: n for runs in cells.values() for x in runs for role, n in x.agents.items()}
        pickers = {
            k.split("/")[0] for runs in cells.values() for x in runs for k in x.test_roles if k.endswith("/offered")
        }
        if not counts or len(pickers) != 1:
            continue
        (answerer, n), picker = next(iter(counts.items())), pickers.pop()
        by_cell = {"untrained": list((untrained_roles or {}).get((row, workflow), {}).values())}
        by_cell |= {name: [x.test_roles for x in runs] for name, runs in cells.items()}
        for name, role_maps in by_cell.items():
            triples = [
                (m[answerer], m[f"{picker}/offered"], independent_offer(m[answerer], n))
                for m in role_maps
                if answerer in m and f"{picker}/offered" in m
            ]
            if triples:
                p, offered, independent = (fmean(t[i] for t in triples) for i in range(3))
                out.append(
                    f"  - {workflow} {name}: {answerer} accuracy {p:.0%}; a right answer among the {n} "
                    f"offered in {offered:.0%} of test episodes, where independent {answerer}s would offer "
                    f"{independent:.0%}"
                )
    if out:
        out.insert(0, "- **Do duplicated answerers fail together?** (test episodes, mean over seeds)")
    return out


def mitigation_table(trained: dict, row: str) -> str:
    lines = [
        "| workflow | mitigation | test (best) − shared | test (last) − shared | cliffs with / without | "
        "top share with / without | diversity fall with / without |",
        "|---|---|---|---|---|---|---|",
    ]
    for (r, workflow, name), runs in trained.items():
        if r != row or "+" not in name:
            continue
        base = {x.seed: x for x in trained.get((row, workflow, "shared"), [])}
        mine = {x.seed: x for x in runs if x.seed in base}
        if not mine:
            continue
        best = paired({s: x.test for s, x in mine.items()}, {s: base[s].test for s in mine})
        last_pairs = {
            s: x.test_final for s, x in mine.items() if x.test_final is not None and base[s].test_final is not None
        }
        last = _paired_text(paired(last_pairs, {s: base[s].test_final for s in last_pairs})) if last_pairs else "—"

        def fall(x: RunSummary) -> float | None:
            return None if x.diversity is None else x.diversity[0] - x.diversity[1]

        lines.append(
            f"| {workflow} | {name.split('+', 1)[1]} | {_paired_text(best)} | {last} | "
            f"{sum(x.cliff for x in mine.values())} / {sum(base[s].cliff for s in mine)} | "
            f"{_mean_or_dash([x.top_share for x in mine.values()], '{:.0%}')} / "
            f"{_mean_or_dash([base[s].top_share for s in mine], '{:.0%}')} | "
            f"{_mean_or_dash([fall(x) for x in mine.values()])} / {_mean_or_dash([fall(base[s]) for s in mine])} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def curve_panels(trained: dict, row: str) -> list[Panel]:
    """One panel per workflow: each cell's validation curve, mean over seeds at each evaluation step."""
    panels: dict[str, Panel] = {}
    for (r, workflow, name), runs in trained.items():
        if r != row:
            continue
        by_step: dict[int, list[float]] = defaultdict(list)
        for x in runs:
            for step, value in x.curve:
                by_step[step].append(value)
        points = [(s, fmean(v)) for s, v in sorted(by_step.items())]
        panels.setdefault(workflow, Panel(f"{workflow} ({row})", "validation success", fraction=True)).lines.append(
            Line(f"{name} ({len(runs)} seeds)", points)
        )
    return list(panels.values())


def _mean_series(runs: list[RunSummary], key: str) -> list[tuple[int, float]]:
    by_step: dict[int, list[float]] = defaultdict(list)
    for x in runs:
        for step, value in x.series.get(key, []):
            by_step[step].append(value)
    return [(s, fmean(v)) for s, v in sorted(by_step.items())]


def diagnostic_panels(trained: dict, row: str) -> list[Panel]:
    """Per workflow, over training steps (mean over seeds): each role's gradient share on the shared policy,
    the duplicated agents' output diversity per cell, and each role's format adherence per cell."""
    panels = []
    for workflow in dict.fromkeys(w for r, w, _ in trained if r == row):
        cells = {n: runs for (r, w, n), runs in trained.items() if (r, w) == (row, workflow)}
        share = Panel(f"{workflow}: gradient share, shared policy", "share of gradient norm", fraction=True)
        for key in sorted({k for x in cells.get("shared", []) for k in x.series if k.startswith("grad_share/")}):
            share.lines.append(Line(key.split("/", 1)[1], _mean_series(cells["shared"], key)))
        diversity = Panel(f"{workflow}: duplicated agents' diversity", "diversity")
        adherence = Panel(f"{workflow}: format adherence", "well-formed share", fraction=True)
        job = Panel(f"{workflow}: job accuracy (all candidates)", "accuracy", fraction=True)
        for name, runs in cells.items():
            for key in sorted({k for x in runs for k in x.series}):
                if key.startswith("diversity/"):
                    diversity.lines.append(Line(name, _mean_series(runs, key)))
                elif key.startswith("format_ok/"):
                    adherence.lines.append(Line(f"{name}: {key.split('/', 1)[1]}", _mean_series(runs, key)))
                elif key.split("/", 1)[0] in JOB_TERMS:
                    job.lines.append(Line(f"{name}: {key.split('/', 1)[1]}", _mean_series(runs, key)))
        panels += [share, diversity, adherence, job]
    return panels


def report(results: dict[str, Any], plots: Path | None = None) -> str:
    trained, untrained, untrained_roles = collect(results)
    rows = sorted({r for r, _, _ in trained})
    parts = []
    for row in rows:
        parts += [
            f"## Row `{row}`",
            "",
            matrix_table(trained, untrained, row),
            "",
            "Findings:",
            "",
            *findings(trained, row, untrained_roles),
            "",
        ]
        mitigations = mitigation_table(trained, row)
        if mitigations:
            parts += ["Mitigations (paired over seeds against the same row's shared cell):", "", mitigations, ""]
        if plots is not None:
            plots.mkdir(parents=True, exist_ok=True)
            path = plots / f"curves-{row}.png"
            if save_figure(path, curve_panels(trained, row)):
                parts += [f"![validation curves, {row}]({path.name})", ""]
            path = plots / f"diagnostics-{row}.png"
            if save_figure(path, diagnostic_panels(trained, row), ncols=4):
                parts += [f"![per-role diagnostics over training, {row}]({path.name})", ""]
    return "\n".join(parts)


def write(results_file: Path, tune_seeds: int = 1) -> Path:
    """flows.md (and its figures) beside a results file: the report, then the alerts scored as detectors
    with their thresholds tuned on the first `tune_seeds` seeds and reported on the rest (when the run
    has seeds on both sides). Returns the markdown file."""
    from teamrl.study import alert_scores  # replays every run: only when a report is written

    results = json.loads(results_file.read_text())
    text = report(results, results_file.parent)
    seeds = sorted({r["seed"] for r in results["results"] if "cells" in r})
    if len(seeds) > tune_seeds:
        tuned = set(seeds[:tune_seeds])
        text += (
            f"\n## Alerts as detectors (thresholds tuned on seed(s) {sorted(tuned)}, scored on "
            f"{seeds[tune_seeds:]})\n\n{alert_scores.table(alert_scores.evaluate(results, tuned))}\n"
        )
    path = results_file.parent / "flows.md"
    path.write_text(text + "\n")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--markdown", type=Path, help="write the report here as well as printing it")
    parser.add_argument("--plots", type=Path, help="folder for the validation-curve figures")
    args = parser.parse_args(argv)
    text = report(json.loads(args.results.read_text()), args.plots)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
