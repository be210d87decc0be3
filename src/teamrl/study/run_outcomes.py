"""What happened in a finished training run, read from its metrics: the outcomes the alerts predict.

Pure functions over a run's logged rows (`teamrl.report.runs.load_metrics`):
  cliff:      held-out success fell at least `drop` below its peak and never came back above
              `peak - drop` (the collapse that the `collapse` and `echo_chamber` alerts warn of);
  adherence:  a role doing its job, over the last `window` training steps against its first `baseline`
              steps (all candidates of a step): its format adherence (`diag/role/<role>/format_ok`) and its
              accuracy at its own job (`verdict_correct` for a verifier, else `correct`); the larger fall of
              the two is the loss of role adherence the `dominant_role` alert warns of;
  onsets:     the first step a role's adherence had fallen (`adherence_onset`), for an alert's lead time;
  coinciding errors: duplicated answerers offered a right answer much less often than independent ones of
              their accuracy would (the echo chamber's "confidently wrong together");
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
COINCIDE_GAP = 0.05
"""Errors coincide when a right answer was offered at least this much less often than independently."""
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


def start_end(
    series: list[tuple[int, float]], baseline: int = BASELINE_STEPS, window: int = WINDOW
) -> tuple[float, float] | None:
    """(mean of the first `baseline` values, mean of the last `window`), or None when too short to tell
    them apart (fewer than baseline + window values)."""
    values = [v for _, v in series]
    if len(values) < baseline + window:
        return None
    return fmean(values[:baseline]), fmean(values[-window:])


JOB_TERMS = ("verdict_correct", "correct")
"""A role's accuracy at its own job: the first of these a run logged for it."""


def adherence_keys(rows: list[dict[str, Any]], role: str) -> list[str]:
    """The metrics that say whether a role does its job: format adherence and its job's accuracy."""
    logged = {k for r in rows for k in r}
    keys = [f"diag/role/{role}/format_ok"] if f"diag/role/{role}/format_ok" in logged else []
    job = next((f"diag/role/{role}/{t}" for t in JOB_TERMS if f"diag/role/{role}/{t}" in logged), None)
    return keys + ([job] if job else [])


def adherence_fall(rows: list[dict[str, Any]], role: str) -> float | None:
    """How far a role's adherence fell from its start to its end (positive: it fell; the larger fall of
    its format adherence and its job accuracy), or None when the run did not log either long enough. The
    role lost adherence when this is at least ADHERENCE_DROP."""
    falls = [e[0] - e[1] for key in adherence_keys(rows, role) if (e := start_end(training_series(rows, key)))]
    return max(falls) if falls else None


def fall_onset(series: list[tuple[int, float]], drop: float = ADHERENCE_DROP) -> int | None:
    """First step at which the trailing-window mean of a series is `drop` below its baseline."""
    if len(series) < BASELINE_STEPS + WINDOW:
        return None
    base = fmean(v for _, v in series[:BASELINE_STEPS])
    for i in range(BASELINE_STEPS + WINDOW - 1, len(series)):
        if base - fmean(v for _, v in series[i - WINDOW + 1 : i + 1]) >= drop - 1e-12:
            return series[i][0]
    return None


def adherence_onset(rows: list[dict[str, Any]], role: str, drop: float = ADHERENCE_DROP) -> int | None:
    """First step at which the role's format adherence or job accuracy (trailing window) is `drop` below
    its baseline."""
    onsets = [
        s for key in adherence_keys(rows, role) if (s := fall_onset(training_series(rows, key), drop)) is not None
    ]
    return min(onsets) if onsets else None


def shared_roles(rows: list[dict[str, Any]]) -> list[str]:
    """Roles that shared a policy with another role (only they log a gradient share)."""
    return sorted(
        {k.split("/")[2] for r in rows for k in r if k.startswith("diag/role/") and k.endswith("/grad_share")}
    )


def logged_roles(rows: list[dict[str, Any]]) -> list[str]:
    """The roles a run logged per-role diagnostics for."""
    return sorted({key.split("/")[2] for r in rows for key in r if key.startswith("diag/role/")})


def series_mean(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [v for _, v in training_series(rows, key)]
    return fmean(values) if values else None


def duplicated_agents(rows: list[dict[str, Any]], roles: list[str]) -> dict[str, int]:
    """role -> number of its agents, for roles whose agents log their own stats as `<role>_<i>`."""
    agents = {k.split("/")[2] for r in rows for k in r if k.startswith("diag/agent/")}
    counts = {role: sum(a.startswith(f"{role}_") and a[len(role) + 1 :].isdigit() for a in agents) for role in roles}
    return {role: n for role, n in counts.items() if n > 1}


def independent_offer(accuracy: float, n: int) -> float:
    """How often at least one of n independent answerers of this accuracy is right.

    >>> independent_offer(0.5, 3)
    0.875
    """
    return 1 - (1 - accuracy) ** n


def errors_coincide(
    role_accuracy: dict[str, float], duplicates: dict[str, int], gap: float = COINCIDE_GAP
) -> bool | None:
    """Whether duplicated answerers' errors coincided on the test episodes: a picker's `<role>/offered`
    share (a right answer among theirs) at least `gap` below `independent_offer`; None when the workflow
    has no picker over duplicated answerers."""
    pickers = [k for k in role_accuracy if k.endswith("/offered")]
    answerers = [r for r in duplicates if r in role_accuracy]
    if len(pickers) != 1 or len(answerers) != 1:
        return None
    expected = independent_offer(role_accuracy[answerers[0]], duplicates[answerers[0]])
    return role_accuracy[pickers[0]] <= expected - gap + 1e-12
