"""What happened in a finished training run, read from its metrics: the outcomes the alerts predict.

Pure functions over a run's logged rows (`teamrl.report.runs.load_metrics`):
  cliff:      held-out success fell at least `drop` below its peak and never came back above
              `peak - drop` (the collapse that the `collapse` and `echo_chamber` alerts warn of);
  adherence:  a role's format adherence (`diag/role/<role>/format_ok`, all candidates of a step) over the
              last `window` training steps against its first `baseline` steps (the loss of role adherence
              the `dominant_role` alert warns of);
  summaries of a per-step series (start, end, mean) for the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean
from typing import Any

CLIFF_DROP = 0.15
"""A cliff: held-out success ends this far below its peak (on 100 validation instances the standard
deviation of a difference of two evaluations near 40% is about 7 points, so 15 is about two of them)."""
ADHERENCE_DROP = 0.15
"""A role lost adherence when its well-formed share fell by at least this much."""
BASELINE_STEPS = 3
WINDOW = 5


@dataclass(frozen=True)
class Cliff:
    """A drop from the peak that did not recover."""

    peak: float
    peak_step: int
    final: float
    onset: int
    """The first evaluation step after the peak from which every evaluation stayed `drop` below it."""


def cliff(curve: list[tuple[int, float]], drop: float = CLIFF_DROP) -> Cliff | None:
    """The cliff of a validation curve [(step, success), ...] in step order, or None.

    >>> cliff([(0, 0.2), (5, 0.5), (10, 0.3), (15, 0.31)])
    Cliff(peak=0.5, peak_step=5, final=0.31, onset=10)
    >>> cliff([(0, 0.2), (5, 0.5), (10, 0.3), (15, 0.45)]) is None  # it recovered
    True
    """
    if not curve:
        raise ValueError("a validation curve needs at least one evaluation")
    peak_at = max(range(len(curve)), key=lambda i: (curve[i][1], -i))  # the first of equal peaks
    peak_step, peak = curve[peak_at]
    final = curve[-1][1]
    if peak - final < drop - 1e-12:
        return None
    onset = len(curve) - 1
    while onset - 1 > peak_at and peak - curve[onset - 1][1] >= drop - 1e-12:
        onset -= 1
    return Cliff(peak=peak, peak_step=peak_step, final=final, onset=curve[onset][0])


def training_series(rows: list[dict[str, Any]], key: str) -> list[tuple[int, float]]:
    """(step, value) of `key` over the training steps that logged it."""
    return [(int(r["step"]), float(r[key])) for r in rows if "train/success" in r and r.get(key) is not None]


def start_end(series: list[tuple[int, float]], baseline: int = BASELINE_STEPS, window: int = WINDOW
              ) -> tuple[float, float] | None:
    """(mean of the first `baseline` values, mean of the last `window`), or None when too short to tell
    them apart (fewer than baseline + window values)."""
    values = [v for _, v in series]
    if len(values) < baseline + window:
        return None
    return fmean(values[:baseline]), fmean(values[-window:])


def adherence_fall(rows: list[dict[str, Any]], role: str, drop: float = ADHERENCE_DROP) -> float | None:
    """How far a role's format adherence fell from its start to its end (positive: it fell), or None when
    the run did not log it. The role lost adherence when this is at least `drop`."""
    ends = start_end(training_series(rows, f"diag/role/{role}/format_ok"))
    return None if ends is None else ends[0] - ends[1]


def logged_roles(rows: list[dict[str, Any]]) -> list[str]:
    """The roles a run logged per-role diagnostics for."""
    return sorted({key.split("/")[2] for r in rows for key in r if key.startswith("diag/role/")})


def series_mean(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [v for _, v in training_series(rows, key)]
    return fmean(values) if values else None
