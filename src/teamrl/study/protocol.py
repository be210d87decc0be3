"""The study's protocol and its statistics, as pure functions.

Protocol: each seed has its own warm-up seed (a fresh warmed-up base per seed, so seeds differ in
their starting point, not only in sampling); the best checkpoint of a run is chosen on the
validation split and only the test split is reported; every cell gives the mean over seeds, the
sample standard deviation and a 95% t-interval; rows that share a seed's warm-up are compared
pairwise (per-seed differences), which removes the warm-up's share of the variance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import mean, stdev
from typing import TypeVar

# Two-sided 95% critical values of Student's t by degrees of freedom (1..30); past 30 the normal's
# 1.96 is within 2% of the t value.
T_975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


@dataclass(frozen=True)
class Protocol:
    """How a study is run: seeds, splits' sizes, samples per instance."""

    seeds: tuple[int, ...] = (0, 1, 2)
    """Run seeds; seed s warms up its own base with warm-up seed `warmup_seed_offset + s`."""
    warmup_seed_offset: int = 100
    """Added to a run seed to give its warm-up seed (so no seed reuses the default warm-up)."""
    validation_instances: int = 100
    """Validation instances per evaluation during training (the best checkpoint is picked on them)."""
    test_instances: int = 100
    """Test instances the best checkpoint is reported on (never seen when picking it)."""
    test_samples: int = 1
    """Sampled episodes per test instance (temperature 1); > 1 also gives pass@k."""

    def __post_init__(self) -> None:
        if len(self.seeds) < 1 or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"study seeds must be distinct and at least one, got {self.seeds}")
        for name in ("validation_instances", "test_instances", "test_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"study {name} must be >= 1, got {getattr(self, name)}")

    def warmup_seed(self, seed: int) -> int:
        return self.warmup_seed_offset + seed


def t_critical(df: int) -> float:
    """The two-sided 95% critical value of Student's t with `df` degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return T_975[df - 1] if df <= len(T_975) else 1.96


@dataclass(frozen=True)
class Summary:
    """One cell: mean over seeds, sample standard deviation and the 95% t-interval (None with one seed)."""

    n: int
    mean: float
    std: float | None
    low: float | None
    high: float | None

    def to_json(self) -> dict[str, float | int | list[float | None] | None]:
        return {"n": self.n, "mean": self.mean, "std": self.std, "ci95": [self.low, self.high]}


def summarize(values: list[float]) -> Summary:
    """Mean, sample std and 95% t-interval mean +- t * std / sqrt(n) of per-seed values.

    >>> s = summarize([0.2, 0.4, 0.6]); round(s.mean, 3), round(s.std, 3), round(s.high, 3)
    (0.4, 0.2, 0.897)
    """
    if not values:
        raise ValueError("summarize needs at least one value (one per seed)")
    if any(not math.isfinite(v) for v in values):
        raise ValueError(f"summarize got a non-finite value: {values}")
    m = mean(values)
    if len(values) == 1:
        return Summary(1, m, None, None, None)
    s = stdev(values)
    half = t_critical(len(values) - 1) * s / math.sqrt(len(values))
    return Summary(len(values), m, s, m - half, m + half)


@dataclass(frozen=True)
class Paired:
    """Row a minus row b over the seeds both ran (same warm-ups): the differences' summary and wins."""

    diff: Summary
    wins: int
    losses: int
    ties: int
    floored: bool = False
    """Every difference was equal, and the spread was set to the test set's sampling noise (`paired`)."""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"diff": self.diff.to_json(), "wins": self.wins, "losses": self.losses}
        return {**out, "ties": self.ties, **({"floored": True} if self.floored else {})}


PairKey = TypeVar("PairKey", int, tuple[str, int])
"""What `paired` matches a and b on: a seed, or (workflow, seed) when runs are pooled over workflows."""


def paired(a: dict[PairKey, float], b: dict[PairKey, float], episodes: int | None = None) -> Paired:
    """Per-seed differences a[s] - b[s] over the seeds in both (seed -> value maps; or (workflow, seed) -> value).

    Equal differences on every seed give a zero-width t-interval, which measures no spread: on a test set
    of 64 episodes two seeds land on the same difference often (the values move in steps of 1/64). Given
    the test episodes behind each value (`episodes`), such a spread is floored at the test set's own
    sampling noise, sqrt(mean over seeds of (a(1-a) + b(1-b)) / episodes), and marked `floored`: zero
    only where both rows sit at 0 or 100% on every seed. Without `episodes` it stays zero, and `verdict`
    reads no interval from it.

    >>> p = paired({0: 0.5, 1: 0.7}, {0: 0.4, 1: 0.7, 2: 0.1}); round(p.diff.mean, 3), p.wins, p.ties
    (0.05, 1, 1)
    >>> f = paired({0: 0.5, 1: 0.5}, {0: 0.25, 1: 0.25}, episodes=64); f.floored, round(f.diff.std, 4)
    (True, 0.0827)
    """
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError(f"no seed in common: a has {sorted(a)}, b has {sorted(b)}")
    diffs = [a[s] - b[s] for s in seeds]
    wins, losses, ties = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs), sum(d == 0 for d in diffs)
    summary = summarize(diffs)
    if len(diffs) > 1 and episodes and max(diffs) - min(diffs) < 1e-12:
        noise = mean(a[s] * (1 - a[s]) + b[s] * (1 - b[s]) for s in seeds) / episodes
        half = t_critical(len(diffs) - 1) * math.sqrt(noise) / math.sqrt(len(diffs))
        summary = Summary(summary.n, summary.mean, math.sqrt(noise), summary.mean - half, summary.mean + half)
        return Paired(summary, wins, losses, ties, floored=True)
    return Paired(summary, wins, losses, ties)


def sample_size(pairs: int, unit: str = "seeds", instances: int | None = None) -> str:
    """What one verdict rests on: 'n = 3 seeds x 64 test instances'.

    >>> sample_size(3, instances=64), sample_size(6, "run pairs")
    ('n = 3 seeds x 64 test instances', 'n = 6 run pairs')
    """
    return f"n = {pairs} {unit}" + (f" x {instances} test instances" if instances else "")


def verdict(
    result: Paired,
    directed: bool = True,
    names: tuple[str, str] = ("a", "b"),
    unit: str = "seeds",
    bound: float | None = None,
    instances: int | None = None,
) -> str:
    """How a paired comparison a - b reads against a claim that a beats b (`directed`) or no claim.

    The 95% interval of the per-seed differences decides: above 0 agrees, below 0 is against. An
    interval that spans 0 but lies inside [-bound, +bound] (`bound`: the table's equivalence bound,
    planned before the run, in the differences' units: 0.05 is 5 points) bounds the effect: "no effect
    larger than X points". Any other interval that spans 0 is not established (the seeds' wins and
    losses are given). One seed has no interval, nor have differences that are all equal unless `paired`
    floored their spread (a zero-width interval is no measured spread). names: how the text calls a and
    b; unit: what one paired difference is (seeds, or e.g. runs when pooled); instances: the test
    instances behind each value (given with n).

    >>> verdict(paired({0: 0.6, 1: 0.7, 2: 0.65}, {0: 0.3, 1: 0.35, 2: 0.35}))
    'agrees: a > b (interval above 0; n = 3 seeds)'
    >>> verdict(paired({0: 0.6, 1: 0.2}, {0: 0.3, 1: 0.4}), names=("shared", "per-agent"))
    'not established (interval spans 0; shared > per-agent on 1 of 2 seeds; n = 2 seeds)'
    >>> verdict(paired({0: 0.6, 1: 0.7}, {0: 0.3, 1: 0.4}))
    'not established (all 2 differences equal, +30.0 points: no spread measured, so no interval; n = 2 seeds)'
    >>> verdict(paired({0: 0.51, 1: 0.49, 2: 0.50}, {0: 0.5, 1: 0.5, 2: 0.5}), bound=0.05, instances=64)
    'no effect larger than 5 points (a - b in [-2.5, +2.5], inside ±5; n = 3 seeds x 64 test instances)'
    """
    a, b = names
    d, pairs = result.diff, result.wins + result.losses + result.ties
    n = sample_size(pairs, unit, instances)
    if d.std is None:
        side = f"{a} > {b}" if d.mean > 0 else f"{a} < {b}" if d.mean < 0 else f"{a} = {b}"
        return f"one {unit.rstrip('s')}: {side}, no interval ({n})"
    assert d.low is not None and d.high is not None  # summarize sets std, low and high together
    if d.std < 1e-12 and not result.floored:
        # Equal differences give a zero-width t-interval, which measures no spread (`paired` floors it when it
        # knows the test set's size).
        return (
            f"not established (all {pairs} differences equal, {100 * d.mean:+.1f} points: "
            f"no spread measured, so no interval; {n})"
        )
    if result.floored:
        n += f"; all {pairs} differences equal, spread set to the test set's sampling noise"
    inside = bound is not None and -bound <= d.low and d.high <= bound
    small = f", inside ±{100 * bound:g} points: a small effect" if inside and bound is not None else ""
    if d.low > 0:
        said = f"{a} > {b} (interval above 0{small}; {n})"
        return f"agrees: {said}" if directed else said
    if d.high < 0:
        said = f"{a} < {b} (interval below 0{small}; {n})"
        return f"against: {said}" if directed else said
    if inside and bound is not None:
        return (
            f"no effect larger than {100 * bound:g} points ({a} - {b} in [{100 * d.low:+.1f}, {100 * d.high:+.1f}], "
            f"inside ±{100 * bound:g}; {n})"
        )
    why = "interval spans 0" if bound is None else f"interval spans 0 and reaches past the ±{100 * bound:g}-point bound"
    return f"not established ({why}; {a} > {b} on {result.wins} of {pairs} {unit}; {n})"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k).

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 4), pass_at_k(4, 0, 2)
    (0.25, 1.0, 0.0)
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(correct: list[list[bool]], k: int) -> float:
    """pass@k averaged over instances, each with its list of sampled outcomes."""
    if not correct:
        raise ValueError("mean_pass_at_k needs at least one instance")
    return mean(pass_at_k(len(samples), sum(samples), k) for samples in correct)
