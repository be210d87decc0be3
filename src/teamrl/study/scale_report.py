"""The scale axis's page: `teamrl study real_scale_calc` writes it as OUT/scale.md; to redo it from a
results file (its run folders beside it, or where the file says they are):

    python -m teamrl.study.scale_report OUT/results.json [--markdown FILE]

The page checks the policy-sharing paper's claims at each scale (one row of kind `scale` per model):
  1. the sharing gain, shared - per_agent test success per workflow, whose sign the paper predicts:
     + on voting (duplicated generators), - on the evaluator-optimizer (distinct roles); paired over
     seeds with its 95% interval and verdict, for the best checkpoint (picked on validation) and for
     the last one (a best checkpoint picked on a validation that never moved is the untrained base);
  2. the paper's findings per scale (`findings_table`): separate policies peak higher; they fall off
     late cliffs where shared ones stay stable; one role dominates a shared policy; duplicated
     answerers fail together (a right answer offered less often than independent answerers would);
  3. each scale row's cells in full (`teamrl.study.flow_report`'s matrix and findings).
A quantity a run's budget cannot show is said so, not shown as zero (a cliff needs three validation
evaluations at least; a run with two has none to fall off).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import fmean
from typing import Any

from teamrl.study import flow_report
from teamrl.study.flow_report import RunSummary
from teamrl.study.protocol import paired, verdict
from teamrl.study.rows import bound_note, planned_bound
from teamrl.study.run_outcomes import independent_offer

PREDICTED_SIGN = {"voting": +1, "evaluator_optimizer": -1}
"""The sign of shared - per_agent the paper predicts: sharing helps duplicated roles, hurts distinct ones."""
MIN_EVALUATIONS_FOR_CLIFF = 3
"""A cliff is a fall after a peak: the peak must come before the last evaluation and after the first."""


def scale_rows(results: dict[str, Any]) -> list[str]:
    """The rows of kind `scale` that have results, in the study's order."""
    scale = {r["row"] for r in results["results"] if "sharing_gain" in r}
    return [row for row in results["rows"] if row in scale]


def sharing_gains(
    results: dict[str, Any], row: str, workflow: str, last: bool = False
) -> tuple[dict[int, float], dict[int, float]]:
    """(shared, per_agent) test success per seed of one scale row's workflow; last: the last checkpoint's."""
    key = "test_final" if last else "test_success"
    shared, separate = {}, {}
    for record in results["results"]:
        cells = record.get("cells", {}).get(workflow, {}) if record["row"] == row else {}
        if cells.get("shared", {}).get(key) is not None and cells.get("per_agent", {}).get(key) is not None:
            shared[record["seed"]] = cells["shared"][key]
            separate[record["seed"]] = cells["per_agent"][key]
    return shared, separate


def _gain_text(shared: dict[int, float], separate: dict[int, float]) -> str:
    d = paired(shared, separate).diff
    interval = "" if d.low is None or d.high is None else f" [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"
    return f"{100 * d.mean:+.1f}{interval}"


def _claim_verdict(workflow: str, shared: dict[int, float], separate: dict[int, float], results: dict[str, Any]) -> str:
    """The paired verdict on the paper's claim for this workflow (the predicted winner as a), with the
    table's planned bound and test split's size."""
    bound, instances = planned_bound(results)[0], results.get("protocol", {}).get("test_instances")
    if PREDICTED_SIGN[workflow] > 0:
        return verdict(
            paired(shared, separate, instances), names=("shared", "per-agent"), bound=bound, instances=instances
        )
    return verdict(paired(separate, shared, instances), names=("per-agent", "shared"), bound=bound, instances=instances)


def gain_table(results: dict[str, Any]) -> str:
    """Per scale and workflow: shared - per_agent test success in points, best and last checkpoint, the
    paper's predicted sign and the verdict on it (best checkpoint), over the seeds both cells ran."""
    lines = [
        "| scale | workflow | paper predicts | shared - per_agent, best ckpt [95%] | verdict (best ckpt) | "
        "shared - per_agent, last ckpt [95%] | seeds | sharing won (best) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in scale_rows(results):
        for workflow, sign in PREDICTED_SIGN.items():
            shared, separate = sharing_gains(results, row, workflow)
            if not shared:
                continue
            last = sharing_gains(results, row, workflow, last=True)
            won = sum(shared[s] > separate[s] for s in shared)
            lines.append(
                f"| {results['labels'].get(row, row)} | {workflow} | {'+' if sign > 0 else '-'} | "
                f"{_gain_text(shared, separate)} | {_claim_verdict(workflow, shared, separate, results)} | "
                f"{_gain_text(*last) if last[0] else '—'} | {len(shared)} | {won} of {len(shared)} |"
            )
    return "\n".join(lines)


def _cliff_text(separate: list[RunSummary], shared: list[RunSummary]) -> str:
    evaluations = min(len(x.curve) for x in separate + shared)
    if evaluations < MIN_EVALUATIONS_FOR_CLIFF:
        return f"not measurable ({evaluations} validation evaluations a run)"
    return f"{sum(x.cliff for x in separate)}/{len(separate)} vs {sum(x.cliff for x in shared)}/{len(shared)}"


def _offer_text(runs: list[RunSummary]) -> str:
    """Voting's generators: how often a right answer was offered on test vs n independent generators."""
    found = [
        (x.test_roles["aggregator/offered"], independent_offer(x.test_roles["generator"], x.agents["generator"]))
        for x in runs
        if "aggregator/offered" in x.test_roles and "generator" in x.test_roles and x.agents.get("generator")
    ]
    if not found:
        return "—"
    return f"{fmean(o for o, _ in found):.0%} vs {fmean(i for _, i in found):.0%}"


def findings_table(results: dict[str, Any], trained: dict[tuple[str, str, str], list[RunSummary]]) -> str:
    """The paper's findings, one line per scale: separate - shared test success (best checkpoint, pooled
    over both workflows and the seeds), cliffs (separate vs shared runs), the largest role's gradient
    share on shared policies, and on voting a right answer offered vs what independent generators would
    offer (shared; per agent)."""
    lines = [
        "| scale | separate peak higher: per_agent - shared, test [95%] | verdict | "
        "cliffs: per_agent vs shared | largest role's gradient share, shared (runs ≥ 60%) | "
        "voting, right answer offered vs independent: shared; per_agent |",
        "|---|---|---|---|---|---|",
    ]
    for row in scale_rows(results):
        runs = {
            name: [x for (r, _, n), xs in trained.items() if r == row and n == name for x in xs]
            for name in ("shared", "per_agent")
        }
        if not runs["shared"] or not runs["per_agent"]:
            continue
        by = {
            name: {(w, x.seed): x.test for (r, w, n), xs in trained.items() if r == row and n == name for x in xs}
            for name in runs
        }
        separate, shared = _pooled(by["per_agent"], by["shared"])
        bound, instances = planned_bound(results)[0], results.get("protocol", {}).get("test_instances")
        peak = (
            verdict(paired(separate, shared, instances), True, ("per-agent", "shared"), "run pairs", bound, instances)
            if separate
            else "—"
        )
        tops = [x.top_share for x in runs["shared"] if x.top_share is not None]
        share = f"{fmean(tops):.0%} ({sum(t >= 0.6 for t in tops)} of {len(tops)})" if tops else "—"
        voting = {
            name: [x for (r, w, n), xs in trained.items() if (r, w, n) == (row, "voting", name) for x in xs]
            for name in runs
        }
        lines.append(
            f"| {results['labels'].get(row, row)} | "
            f"{_gain_text(separate, shared) if separate else '—'} | {peak} | "
            f"{_cliff_text(runs['per_agent'], runs['shared'])} | {share} | "
            f"{_offer_text(voting['shared'])}; {_offer_text(voting['per_agent'])} |"
        )
    return "\n".join(lines)


def _pooled(
    a: dict[tuple[str, int], float], b: dict[tuple[str, int], float]
) -> tuple[dict[int, float], dict[int, float]]:
    """(workflow, seed)-keyed values renumbered as one sample per pair, for `paired`."""
    keys = sorted(set(a) & set(b))
    return {i: a[k] for i, k in enumerate(keys)}, {i: b[k] for i, k in enumerate(keys)}


def report(results: dict[str, Any], base: Path | None = None) -> str:
    """The page's markdown. base: the results file's folder, where run folders are looked for when the
    paths the file records are gone (a copied or moved study folder)."""
    trained, untrained, untrained_roles = flow_report.collect(results, base)
    note = bound_note(results)
    parts = [
        "# Scale axis: shared vs per-agent policies",
        "",
        "Shared - per-agent test success, in points (the paper predicts + on voting's duplicated "
        "generators, - on the evaluator-optimizer's distinct roles)" + (f". {note}" if note else ":"),
        "",
        gain_table(results),
        "",
        "The paper's findings at each scale (trained runs of both workflows, all seeds):",
        "",
        findings_table(results, trained),
        "",
    ]
    for row in scale_rows(results):
        parts += [
            f"## {results['labels'].get(row, row)}",
            "",
            flow_report.matrix_table(trained, untrained, row),
            "",
            *flow_report.findings(trained, row, untrained_roles),
            "",
        ]
    return "\n".join(parts)


def write(results_path: Path) -> Path:
    """OUT/scale.md beside the results file."""
    page = results_path.with_name("scale.md")
    page.write_text(report(json.loads(results_path.read_text()), results_path.parent) + "\n")
    return page


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--markdown", type=Path, help="write the page here as well as printing it")
    args = parser.parse_args(argv)
    text = report(json.loads(args.results.read_text()), args.results.parent)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
