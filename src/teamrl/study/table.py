"""The study's results page: results.json -> table.md and index.html with per-row validation curves.

Every cell is the mean test success over seeds with its spread (sample std) and 95% t-interval;
the paired comparisons (rows of one seed share its warm-up) follow the table, and the untrained
base's pass@1 / pass@k / greedy (validation, per seed) after them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from teamrl.report.page import esc, fmt, plot, table, write_page
from teamrl.report.plots import Line, Panel, color_for, save_figure
from teamrl.study import scale_report
from teamrl.study.protocol import Paired, Summary, paired, summarize, verdict
from teamrl.study.role_form import pooled
from teamrl.study.rows import COMPARISONS, ROWS, STUDIES, UNDIRECTED, bound_note, named_model, planned_bound


def by_row(results: dict[str, Any], metric: str = "test_success") -> dict[str, dict[int, float]]:
    """row -> seed -> the metric, from a results.json payload."""
    values: dict[str, dict[int, float]] = defaultdict(dict)
    for record in results["results"]:
        values[record["row"]][record["seed"]] = record[metric]
    return dict(values)


def cell(summary: Summary) -> str:
    """'41.0% ± 3.2 [33.1, 48.9]' (mean, std and 95% interval in points); one seed: the mean only."""
    if summary.std is None:
        return f"{summary.mean:.1%} (1 seed)"
    assert summary.low is not None and summary.high is not None  # summarize sets std, low and high together
    return f"{summary.mean:.1%} ± {100 * summary.std:.1f} [{100 * summary.low:.1f}, {100 * summary.high:.1f}]"


def paired_cell(result: Paired) -> str:
    d = result.diff
    interval = "" if d.low is None or d.high is None else f" [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"
    return f"{100 * d.mean:+.1f} pts{interval}; {result.wins} wins, {result.losses} losses, {result.ties} ties"


def comparisons(
    values: dict[str, dict[int, float]],
    bound: float | None = None,
    instances: int | None = None,
    episodes: int | None = None,
) -> list[tuple[str, str, Paired, str]]:
    """(question, 'a - b', paired result, verdict against the papers' claim) for each comparison whose
    two rows both ran; bound: the table's planned equivalence bound; instances: test instances per cell;
    episodes: test episodes per cell (instances x samples; default: instances), the floor of `paired`."""
    out = []
    for a, b, question in COMPARISONS:
        if a in values and b in values and set(values[a]) & set(values[b]):
            result = paired(values[a], values[b], episodes or instances)
            said = verdict(result, (a, b) not in UNDIRECTED, bound=bound, instances=instances)
            out.append((question, f"{a} - {b}", result, said))
    return out


def table_comparisons(results: dict[str, Any]) -> list[tuple[str, str, Paired, str]]:
    """`comparisons` of a results file, with its planned bound and test split's size."""
    protocol = results.get("protocol", {})
    instances = protocol.get("test_instances")
    episodes = instances * protocol.get("test_samples", 1) if instances else None
    return comparisons(by_row(results), planned_bound(results)[0], instances, episodes)


def base_lines(results: dict[str, Any]) -> list[str]:
    lines = []
    order = {key: i for i, key in enumerate(results["rows"])}
    for record in sorted(results["results"], key=lambda r: (order.get(r["row"], len(order)), r["seed"])):
        base = record.get("base")
        if base:
            k = base["k"]
            lines.append(
                f"| {record['label']} | {record['seed']} | {base['pass@1']:.1%} | {base[f'pass@{k}']:.1%} "
                f"(k={k}) | {base['greedy']:.1%} |"
            )
    return lines


def hetero_lines(results: dict[str, Any]) -> list[str]:
    """One line per seed of the `hetero` row: both bases' strengths and the roles' bases."""
    lines = []
    for record in sorted((r for r in results["results"] if r["row"] == "hetero"), key=lambda r: r["seed"]):
        strengths = record["strengths"]
        cells = [" / ".join(f"{v:.0%}" for v in strengths[base].values()) for base in ("A", "B")]
        roles = ", ".join(f"{role} {base}" for role, base in record["assignment"].items())
        lines.append(f"| {record['seed']} | {cells[0]} | {cells[1]} | {roles} |")
    return lines


def role_form_lines(results: dict[str, Any]) -> list[str]:
    """One line per (row, role) of the rows whose cells recorded their roles' form (`teamrl.study.role_form`),
    pooled over seeds: well formed, right, right among the well formed."""
    lines = []
    for key in results["rows"]:
        records = [r for r in results["results"] if r["row"] == key and "roles" in r]
        for role, c in pooled(records).items():
            turns, formed = c["turns"], c.get("well_formed")
            share = f"{formed / turns:.1%}" if formed is not None and turns else "-"
            right = f"{c['right'] / turns:.1%}" if "right" in c and turns else "-"
            among = f"{c['right_formed'] / formed:.1%}" if "right_formed" in c and formed else "-"
            lines.append(f"| {results['labels'][key]} | {role} | {turns} | {share} | {right} | {among} |")
    return lines


def row_models(results: dict[str, Any]) -> dict[str, str]:
    """row -> the model its seeds start from, with overrides in `seed_run.row_config`'s order: the study's,
    the row's own, then the user's `policy.model=` for every row (`Study.with_model`)."""
    chosen = STUDIES.get(results["study"])
    if chosen is None:
        return {"": named_model(results.get("overrides", ())) or "tiny-default"}
    user = named_model(results.get("overrides", ()))
    chosen = chosen.with_model(user) if user else chosen
    keys = results.get("rows") or chosen.rows or ("",)  # "": a study of every row its kinds allow
    models = {
        key: named_model([*chosen.overrides, *(ROWS[key].overrides if key in ROWS else ()), *chosen.model_overrides()])
        or "tiny-default"
        for key in keys
    }
    # The `bases` rows put base B on some roles (`hetero`, which roles per seed) or on all (`homo_b`).
    base_b = chosen.base_b or "base B (a warmed-up Qwen2 variant)"
    for key in keys:
        if key in ROWS and ROWS[key].kind == "bases":
            models[key] = base_b if key == "homo_b" else f"{models[key]} and {base_b}, by role"
    return models


def starting_point(results: dict[str, Any]) -> str:
    """Where the seeds' models start: a warmed-up tiny default per seed, or one named checkpoint for all
    (a row that names its own model, like a scale row, is told apart)."""
    models = row_models(results)
    distinct = sorted(set(models.values()))
    if len(distinct) > 1:
        each = "; ".join(f"{key}: {model}" for key, model in models.items())
        tiny = "tiny-default warms up its own base per seed, " if "tiny-default" in distinct else ""
        return (
            f"the rows start from different models ({each}); {tiny}a pretrained model has no warm-up and its "
            "seeds differ in sampling and training only."
        )
    model = distinct[0]
    if model == "tiny-default":
        return "each seed warms up its own base."
    return (
        f"every seed starts from the same pretrained weights (policy.model={model}; no warm-up) and differs "
        "in sampling and training only."
    )


def markdown(results: dict[str, Any]) -> str:
    """The table, the paired comparisons and the base rates as Markdown."""
    values = by_row(results)
    protocol = results["protocol"]
    lines = [
        f"# Study {results['study']}",
        "",
        f"Test success (sampled, {protocol['test_instances']} test instances; best checkpoint picked on "
        f"{protocol['validation_instances']} validation instances), mean ± std [95% t-interval] over seeds "
        f"{', '.join(map(str, protocol['seeds']))}; {starting_point(results)}",
        "",
        "| row | test success | seeds |",
        "|---|---|---|",
    ]
    for key in results["rows"]:
        if key in values:
            lines.append(
                f"| {results['labels'][key]} | {cell(summarize(list(values[key].values())))} | {len(values[key])} |"
            )
    chosen = STUDIES.get(results["study"])
    if chosen is not None and chosen.transfer_label and any(k.endswith("_transfer") for k in values):
        lines += [
            "",
            f"Unseen variant of the transfer rows: {chosen.transfer_label} ({', '.join(chosen.transfer)}); "
            "scored with the source row's checkpoint, picked on the original validation split.",
        ]
    found = table_comparisons(results)
    if found:
        note = bound_note(results)
        lines += [
            "",
            "Paired comparisons (per-seed differences, same starting weights; the papers claim a > b unless "
            "the verdict gives no 'agrees/against'):",
            *(["", note] if note else []),
            "",
            "| question | a - b | difference | verdict |",
            "|---|---|---|---|",
        ]
        lines += [f"| {q} | {ab} | {paired_cell(p)} | {v} |" for q, ab, p, v in found]
    pairs = hetero_lines(results)
    if pairs:
        roles = " / ".join(next(r for r in results["results"] if r["row"] == "hetero")["assignment"])
        lines += [
            "",
            "Heterogeneous pair: each base's per-role accuracy (validation, the other role played by the "
            "strong scripted team) and the assignment it gave:",
            "",
            f"| seed | base A ({roles}) | base B ({roles}) | hetero row |",
            "|---|---|---|---|",
            *pairs,
        ]
    form = role_form_lines(results)
    if form:
        lines += [
            "",
            "Form or skill, per role, on the test episodes (pooled over seeds; a rise in well formed alone is "
            "form, a rise in right among the well formed is skill):",
            "",
            "| row | role | turns | well formed | right | right among well formed |",
            "|---|---|---|---|---|---|",
            *form,
        ]
    base = base_lines(results)
    if base:
        lines += [
            "",
            "Untrained base on the validation split:",
            "",
            "| row | seed | pass@1 | pass@k | greedy |",
            "|---|---|---|---|---|",
            *base,
        ]
    warmups = sum(results.get("warmup_seconds", {}).values())
    lines += [
        "",
        f"Wall time: {results.get('seconds', 0.0):.0f} s in the rows, {warmups:.0f} s in warm-ups (0 when cached).",
    ]
    return "\n".join(lines) + "\n"


def curves_figure(results: dict[str, Any], path: Path) -> bool:
    """One panel per trained row: validation success over steps, one line per seed."""
    panels = []
    for key in results["rows"]:
        records = [r for r in results["results"] if r["row"] == key and r.get("curve")]
        if records:
            panels.append(
                Panel(
                    results["labels"][key],
                    "validation success",
                    [
                        Line(f"seed {r['seed']}", [tuple(p) for p in r["curve"]], color_for(i))
                        for i, r in enumerate(records)
                    ],
                    fraction=True,
                )
            )
    return save_figure(path, panels)


def only_seeds(results: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """The results payload with only these seeds' cells (the rest of it as is): a subset's table, such as
    the seeds added after a decision was taken on the earlier ones."""
    kept = [record for record in results["results"] if record["seed"] in seeds]
    if not kept:
        found = sorted({record["seed"] for record in results["results"]})
        raise ValueError(f"no cell of seeds {sorted(seeds)} in {results['study']}'s results; its seeds: {found}")
    protocol = {**results.get("protocol", {}), "seeds": sorted({record["seed"] for record in kept})}
    seconds = sum(record.get("seconds", 0.0) for record in kept)  # the subset's own cell time
    return {**results, "results": kept, "protocol": protocol, "seconds": seconds}


def write_report(results_file: Path) -> Path:
    """table.md and index.html (with curves.png) beside results.json; returns the HTML page."""
    results = json.loads(results_file.read_text())
    out = results_file.parent
    text = markdown(results)
    (out / "table.md").write_text(text)
    drawn = curves_figure(results, out / "curves.png")
    values = by_row(results)
    rows = [
        [esc(results["labels"][k]), esc(cell(summarize(list(values[k].values())))), fmt(len(values[k]), "int")]
        for k in results["rows"]
        if k in values
    ]
    pairs = [[esc(q), esc(ab), esc(paired_cell(p)), esc(v)] for q, ab, p, v in table_comparisons(results)]
    sections = [
        ("table", "Test success", table(["row", "test success (mean ± std [95% CI])", "seeds"], rows, {2})),
        ("paired", "Paired comparisons", table(["question", "a - b", "difference", "verdict"], pairs)),
        (
            "curves",
            "Validation curves",
            plot("curves.png" if drawn else None, "validation curves", "validation success per trained row"),
        ),
    ]
    if any(r.get("sharing_gain") for r in results["results"]):  # a scale axis: its claim's quantity, as scale.md has it
        sections.append(
            (
                "scale",
                "Scale axis: shared - per-agent test success",
                f"<pre>{esc(scale_report.gain_table(results))}</pre>\n",
            )
        )
    header = f"<h1>Study {esc(results['study'])}</h1>\n<pre>{esc(text)}</pre>\n"
    return write_page(out, f"teamrl study {results['study']}", header, sections)


def main(argv: list[str] | None = None) -> None:
    """Redo a results file's table.md (and with --page its index.html and curves) without rerunning:

    python -m teamrl.study.table OUT/results.json [--page]
    python -m teamrl.study.table OUT/results.json --seeds 7 8 9   # print a subset's table; table.md untouched
    """
    import argparse

    parser = argparse.ArgumentParser(description="redo a study's table.md from its results.json")
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--page", action="store_true", help="also index.html and curves.png")
    parser.add_argument(
        "--seeds", type=int, nargs="+", help="print the table of these seeds' cells only; table.md is left as it is"
    )
    args = parser.parse_args(argv)
    if args.seeds is not None:
        for path in args.results:
            try:
                print(markdown(only_seeds(json.loads(path.read_text()), args.seeds)))
            except ValueError as error:
                parser.error(f"{path}: {error}")
        return
    for path in args.results:
        if args.page:
            print(write_report(path))
        else:
            (path.parent / "table.md").write_text(markdown(json.loads(path.read_text())))
            print(path.parent / "table.md")


if __name__ == "__main__":
    main()
