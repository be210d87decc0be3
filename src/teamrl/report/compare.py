"""The comparison page of several runs: overlaid curves and a table of headline numbers."""

from __future__ import annotations

from pathlib import Path

from teamrl.report.page import esc, fmt, plot, table, write_page
from teamrl.report.plots import Line, Panel, color_for, save_figure
from teamrl.report.runs import RunData


def run_labels(runs: list[RunData]) -> list[str]:
    """Run directory names; where two runs share a name, the parent folder tells them apart."""
    names = [r.name for r in runs]
    labels = []
    for run in runs:
        if names.count(run.name) == 1:
            labels.append(run.name)
        else:
            labels.append(f"{run.path.resolve().parent.name}/{run.name}")
    # Still equal (same path given twice): number them so legend entries stay distinct.
    return [label if labels.count(label) == 1 else f"{label} #{i + 1}" for i, label in enumerate(labels)]


def write_comparison(runs: list[RunData], out: Path) -> Path:
    """Write out/index.html comparing the runs, with its PNGs; returns the page path."""
    out.mkdir(parents=True, exist_ok=True)
    labels = run_labels(runs)
    colors = [color_for(i) for i in range(len(runs))]

    def overlay(key: str) -> list[Line]:
        return [Line(label, run.series(key), color) for run, label, color in zip(runs, labels, colors)]

    heldout = save_figure(
        out / "compare_heldout.png", [Panel("Held-out success", "success rate", overlay("eval/success"), True)], ncols=1
    )
    train = save_figure(
        out / "compare_train.png",
        [
            Panel("Training success", "success rate", overlay("train/success"), True),
            Panel("Training team return", "team return", overlay("train/team_return")),
        ],
        ncols=2,
    )
    agents = list(dict.fromkeys(a for run in runs for a in run.names_under("role/", "/reward")))
    roles = save_figure(
        out / "compare_roles.png",
        [Panel(f"Reward of agent “{agent}”", "mean reward", overlay(f"role/{agent}/reward")) for agent in agents],
        ncols=min(3, max(1, len(agents))),
    )

    sections = [
        ("table", "Headline numbers", _table_html(runs, labels)),
        (
            "heldout",
            "Held-out success",
            plot(
                "compare_heldout.png" if heldout else None,
                "held-out success",
                "Held-out success rate of every run over training steps (step 0 = before training).",
            ),
        ),
        (
            "train",
            "Training rollouts",
            plot(
                "compare_train.png" if train else None,
                "training success and return",
                "Success and team return of each run's sampled training episodes; long runs show a "
                "trailing mean over the faint raw curve.",
            ),
        ),
        (
            "roles",
            "Per-agent reward",
            plot(
                "compare_roles.png" if roles else None,
                "per-agent reward",
                "One panel per agent: the mean training reward of that agent's turns, one line per run.",
            ),
        ),
    ]
    header = (
        f"<h1>Comparison of {len(runs)} runs</h1>\n"
        f'<p class="sub">Each run is labelled by its run directory name; colours match across plots.</p>\n'
    )
    return write_page(out, f"teamrl comparison of {len(runs)} runs", header, sections)


def _table_html(runs: list[RunData], labels: list[str]) -> str:
    rows = []
    for run, label, color in zip(runs, labels, (color_for(i) for i in range(len(runs)))):
        h = run.headline()
        swatch = f'<span style="color:{color}">■</span> '
        name = swatch + esc(label) + ("" if h.from_summary else " <em>(unfinished: from metrics.jsonl)</em>")
        rows.append(
            [
                name,
                fmt(h.initial, "pct"),
                fmt(h.peak, "pct"),
                fmt(h.final, "pct"),
                fmt(h.best_step, "int"),
                fmt(h.steps, "int"),
                fmt(h.train_seconds, "sec"),
                f"<code>{esc(run.path.resolve())}</code>",
            ]
        )
    headers = [
        "run",
        "initial held-out success",
        "peak held-out success",
        "final held-out success",
        "best step",
        "steps",
        "train time",
        "run directory",
    ]
    caption = (
        '<p class="caption">Held-out success before training, at its best evaluation and at '
        "the end; the step of the best evaluation (the earliest one reaching the peak); training steps and seconds (from each "
        "run's summary.json, or from metrics.jsonl for an unfinished run).</p>\n"
    )
    return caption + table(headers, rows, numeric={1, 2, 3, 4, 5, 6})
