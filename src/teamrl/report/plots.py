"""PNG line plots for the report, drawn with matplotlib's Agg renderer.

Figures are built with `matplotlib.figure.Figure` directly rather than pyplot, so making a
report never switches the caller's global backend (a notebook keeps its inline plots) and no
figure is left registered in pyplot's state afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from teamrl.report.runs import Series

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# Colour-blind-friendly (Okabe-Ito); a run or agent keeps its colour across every panel.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]
# Past this many points a raw RL curve is mostly noise: draw it faint under a trailing mean.
SMOOTH_ABOVE = 30
# Sparse curves (held-out evals) get a marker per point so single evaluations stay visible.
MARKERS_UP_TO = 15


@dataclass
class Line:
    """One curve: its (step, value) points and a legend label ("" = the panel's only curve, unlabelled)."""

    label: str
    points: Series
    color: str | None = None


@dataclass
class Panel:
    """One set of axes. `fraction` pins the y-axis to [0, 1] so success rates compare at a glance."""

    title: str
    ylabel: str
    lines: list[Line] = field(default_factory=list)
    fraction: bool = False
    markers: list[tuple[int, str, str]] = field(default_factory=list)
    """Vertical lines at (step, legend label, colour): events such as alerts on the timeline."""

    def has_data(self) -> bool:
        return any(line.points for line in self.lines)


def color_for(index: int) -> str:
    """The palette colour of the index-th run or agent (cycles past eight)."""
    return PALETTE[index % len(PALETTE)]


def trailing_mean(values: list[float], window: int) -> list[float]:
    """Mean of the last `window` values at each point (shorter at the start, never lagging NaNs)."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def save_figure(path: Path, panels: list[Panel], ncols: int = 2) -> bool:
    """Draw the panels that have data into one PNG; returns False (writing nothing) if none do."""
    from matplotlib.figure import Figure

    panels = [p for p in panels if p.has_data()]
    if not panels:
        return False
    ncols = min(ncols, len(panels))
    nrows = -(-len(panels) // ncols)
    # Widths near the page's ~1100 px column, so a row of panels shows at roughly 1:1 and the
    # axis labels keep the same size from one figure to the next.
    width = {1: 8.0, 2: 10.0}.get(ncols, 11.0)
    fig = Figure(figsize=(width, 3.4 * nrows), dpi=100, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, panel in zip(axes, panels):
        _draw(ax, panel)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    fig.savefig(path, format="png")
    return True


def _draw(ax: "Axes", panel: Panel) -> None:
    # Smoothing is decided per panel, not per line: overlaid runs of different lengths must be
    # averaged over the same window to compare fairly. Only sparse lines (evals drawn next to
    # per-step curves) stay raw, with a marker per point.
    longest = max(len(line.points) for line in panel.lines)
    window = max(3, longest // 20) if longest > SMOOTH_ABOVE else 0
    for index, line in enumerate(panel.lines):
        if not line.points:
            continue
        color = line.color or color_for(index)
        steps = [p[0] for p in line.points]
        values = [p[1] for p in line.points]
        if window and len(values) > MARKERS_UP_TO:
            ax.plot(steps, values, color=color, alpha=0.25, linewidth=0.8)
            # The legend always says a curve is smoothed, so nobody reads a mean as raw values.
            ax.plot(
                steps,
                trailing_mean(values, window),
                color=color,
                linewidth=1.8,
                label=f"{line.label + ': ' if line.label else ''}trailing mean of {window} points",
            )
        else:
            ax.plot(
                steps,
                values,
                color=color,
                linewidth=1.6,
                label=line.label or None,
                marker="o" if len(values) <= MARKERS_UP_TO else None,
                markersize=4,
            )
    labelled: set[str] = set()
    for step, label, color in panel.markers:
        ax.axvline(step, color=color, linestyle="--", linewidth=1.2, label=None if label in labelled else label)
        labelled.add(label)
    ax.set_title(panel.title, fontsize=11)
    ax.set_xlabel("training step")
    ax.set_ylabel(panel.ylabel)
    ax.grid(True, alpha=0.3)
    if panel.fraction:
        ax.set_ylim(-0.03, 1.03)
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=8, loc="best")
