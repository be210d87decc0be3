"""Seeds and test-set sizes for a decisive table, planned from a finished table's measured spread:

    python -m teamrl.study.power_plan benchmarks/results/real_split_calc/results.json [--target 5]

Each claim of a table is a paired difference a - b over seeds. Its per-seed differences have a sample
standard deviation S, measured at E0 test episodes per cell (instances x samples per instance). The
table's test instances are a fixed list (the first m of the split), the same for every seed and row, so
S holds the training seed's effect and the sampling noise of the test episodes, and only the sampling
noise shrinks with more test episodes. Its share of S^2 is at most the independent-binomial bound
(pa(1 - pa) + pb(1 - pb)) / E0 (heterogeneous instances and the rows' shared evaluation seed make it
smaller), and at most S^2 itself. Two readings bracket the truth:

  conservative: none of S^2 is sampling noise: variance S^2 whatever the test size;
  optimistic:   the bound's share is sampling noise: S^2 - b + b E0 / E at E episodes, b = min(S^2, bound).

Each claim is planned at S_plan = max(S, the table's pooled S) (3 seeds give a claim's S two degrees of
freedom; the pooled root-mean-square over the table's claims has more), and needs n seeds where the 95%
t half-width t(n - 1) sqrt(V / n) falls below the target. The plan takes the conservative n at the
planned test size; the optimistic n is shown beside it. A table's cost is its rows' measured mean cell
seconds, plus the extra test episodes at the measured seconds of one test episode, times the seeds.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import mean, stdev
from typing import Any

from teamrl.study import real_budget, scale_report
from teamrl.study.protocol import t_critical
from teamrl.study.rows import COMPARISONS

TARGET = 0.05
"""The planned 95% half-width of a paired difference: 5 points."""
MAX_SEEDS = 16
"""Past this many seeds a claim is called out of reach for the table (its spread is the problem)."""
TEST_EPISODES_PER_INSTANCE = {"single": 0.5, "single_grpo": 0.5}
"""Test episodes one cell scores per test instance, in two-turn episodes (the single agent answers once):
every other Split-Calc row scores one two-turn team episode per instance."""
SCALE_TEST_SCORINGS = 5
"""Test scorings of one scale workflow per seed: untrained, and best and last checkpoint of the shared and
the per-agent run (the last is skipped when it is the best; counted, to stay on the safe side)."""
SCALE_MODEL_COST = {"scale_tiny": real_budget.MODEL_COST["tiny-default"]}
"""A scale row's test episode cost relative to SmolLM2's (real models 1)."""


@dataclass(frozen=True)
class Claim:
    """One paired comparison of a finished table."""

    name: str
    rows: tuple[str, ...]  # the table rows whose cells it compares
    diffs: tuple[float, ...]  # per seed (or per run pair), a - b
    rate_a: float  # mean success of a
    rate_b: float

    @property
    def spread(self) -> float:
        return stdev(self.diffs)

    @property
    def decided(self) -> bool:
        """Whether its 95% interval already excludes 0 (agrees or against): more seeds only narrow it."""
        return abs(mean(self.diffs)) > half_width(self.spread**2, len(self.diffs))

    def sampling_bound(self, episodes: float) -> float:
        """Upper bound on the sampling noise's variance in one difference at `episodes` test episodes."""
        return (self.rate_a * (1 - self.rate_a) + self.rate_b * (1 - self.rate_b)) / episodes


def half_width(variance: float, seeds: int) -> float:
    """The expected 95% t half-width of a mean of `seeds` differences of this variance.

    >>> round(half_width(0.05**2, 3), 4)  # t(2) 4.303 x 0.05 / sqrt(3)
    0.1242
    """
    return t_critical(seeds - 1) * math.sqrt(variance / seeds)


def seeds_needed(variance: float, target: float = TARGET, cap: int = MAX_SEEDS) -> int | None:
    """The fewest seeds (at least 3) whose expected half-width is below `target`; None past `cap`.

    >>> seeds_needed(0.05**2), seeds_needed(0.039**2), seeds_needed(0.2**2)
    (7, 5, None)
    """
    for n in range(3, cap + 1):
        if half_width(variance, n) < target:
            return n
    return None


def claims(results: dict[str, Any]) -> list[Claim]:
    """The table's paired comparisons: the study comparisons whose rows both ran, and a scale axis's
    shared - per_agent gain per scale and workflow."""
    values: dict[str, dict[int, float]] = {}
    for record in results["results"]:
        values.setdefault(record["row"], {})[record["seed"]] = record["test_success"]
    found = []
    for a, b, _ in COMPARISONS:
        if a in values and b in values:
            seeds = sorted(set(values[a]) & set(values[b]))
            if len(seeds) >= 2:
                diffs = tuple(values[a][s] - values[b][s] for s in seeds)
                found.append(Claim(f"{a} - {b}", (a, b), diffs, mean(values[a].values()), mean(values[b].values())))
    for row in scale_report.scale_rows(results):
        for workflow in scale_report.PREDICTED_SIGN:
            shared, separate = scale_report.sharing_gains(results, row, workflow)
            if len(shared) >= 2:
                diffs = tuple(shared[s] - separate[s] for s in sorted(shared))
                name = f"{row} {workflow}: shared - per_agent"
                found.append(Claim(name, (row,), diffs, mean(shared.values()), mean(separate.values())))
    return found


@dataclass(frozen=True)
class ClaimPlan:
    claim: Claim
    planned_spread: float
    seeds_conservative: int | None
    seeds_optimistic: int | None
    half_width_now: float  # expected at the table's seeds and test size, conservative

    @property
    def sets_seeds(self) -> bool:
        """Whether the plan sizes its rows' seeds by this claim: undecided and within reach."""
        return not self.claim.decided and self.seeds_conservative is not None


@dataclass(frozen=True)
class TablePlan:
    study: str
    seeds_now: int
    episodes_now: int
    instances: int
    samples: int
    typical_spread: float
    claims: tuple[ClaimPlan, ...]
    row_seeds: dict[str, int]  # the plan: each row's seeds
    row_seconds: dict[str, float]  # one cell of each row at the planned test size, on one core

    @property
    def seeds(self) -> int:
        return max(self.row_seeds.values())

    @property
    def hours(self) -> float:
        return sum(self.row_seeds[r] * s for r, s in self.row_seconds.items()) / 3600

    @property
    def unreachable(self) -> tuple[str, ...]:
        return tuple(p.claim.name for p in self.claims if not p.claim.decided and p.seeds_conservative is None)


def test_episode_s(results: dict[str, Any]) -> float:
    """Seconds of one two-turn test episode: from a table's `swapped` row (one test scoring and a load)
    when it has one, else the study's planned price."""
    swapped = [r["seconds"] for r in results["results"] if r["row"] == "swapped" and "seconds" in r]
    if swapped:
        return max(mean(swapped) - real_budget.LOAD_S, 1.0) / results["protocol"]["test_instances"]
    return real_budget.EVAL_EPISODE_S


def cell_seconds(results: dict[str, Any], episodes: int, episode_s: float) -> dict[str, float]:
    """row -> the mean measured seconds of its cells, plus (or less) the test episodes a new test size adds."""
    before = results["protocol"]["test_instances"] * results["protocol"].get("test_samples", 1)
    rows: dict[str, list[float]] = {}
    for record in results["results"]:
        if "seconds" in record:
            rows.setdefault(record["row"], []).append(float(record["seconds"]))
    out = {}
    for row, seconds in rows.items():
        if row.startswith("scale_"):
            per_instance = (
                SCALE_MODEL_COST.get(row, 1.0)
                * SCALE_TEST_SCORINGS
                * sum(t / real_budget.MEASURED_TURNS for t in real_budget.SCALE_WORKFLOW_TURNS.values())
            )
        else:
            per_instance = TEST_EPISODES_PER_INSTANCE.get(row, 1.0)
        out[row] = mean(seconds) + (episodes - before) * per_instance * episode_s
    return out


def typical_spread(tables: list[dict[str, Any]]) -> float:
    """The median per-seed spread of every claim of these tables: what a claim measured on 3 seeds (two
    degrees of freedom) is planned at, at least."""
    spreads = sorted(c.spread for t in tables for c in claims(t))
    if not spreads:
        raise ValueError("no paired comparison with two seeds or more to plan from")
    middle = len(spreads) // 2
    return spreads[middle] if len(spreads) % 2 else (spreads[middle - 1] + spreads[middle]) / 2


def plan_table(
    results: dict[str, Any],
    instances: int,
    samples: int = 1,
    target: float = TARGET,
    episode_s: float | None = None,
    typical: float | None = None,
) -> TablePlan:
    """The seeds each row of a table needs at `instances` x `samples` test episodes per cell for every
    undecided, reachable claim's expected half-width to be under `target`, and its cost on one core.

    typical: the spread a claim is planned at, at least (default: this table's `typical_spread`)."""
    found = claims(results)
    if not found:
        raise ValueError(f"{results.get('study')}: no paired comparison with two seeds or more to plan from")
    protocol = results["protocol"]
    before = protocol["test_instances"] * protocol.get("test_samples", 1)
    episodes = instances * samples
    floor = typical_spread([results]) if typical is None else typical
    plans = []
    for c in found:
        spread = max(c.spread, floor)
        sampled = min(spread**2, c.sampling_bound(before))
        optimistic = spread**2 - sampled + sampled * before / episodes
        plans.append(
            ClaimPlan(
                c,
                spread,
                seeds_needed(spread**2, target),
                seeds_needed(optimistic, target),
                half_width(c.spread**2, len(c.diffs)),
            )
        )
    seconds = cell_seconds(results, episodes, test_episode_s(results) if episode_s is None else episode_s)
    now = len(protocol["seeds"])
    row_seeds = {row: now for row in seconds}
    for p in plans:
        if p.sets_seeds:
            assert p.seeds_conservative is not None  # sets_seeds says so
            for row in p.claim.rows:
                row_seeds[row] = max(row_seeds.get(row, now), p.seeds_conservative)
    return TablePlan(results["study"], now, before, instances, samples, floor, tuple(plans), row_seeds, seconds)


def _seeds(n: int | None) -> str:
    return f"{n}" if n is not None else f"> {MAX_SEEDS}"


def markdown(plan: TablePlan, target: float = TARGET) -> str:
    lines = [
        f"Plan for {plan.study} (target: 95% half-width < {100 * target:g} points; measured at "
        f"{plan.seeds_now} seeds x {plan.episodes_now} test episodes; planned at {plan.instances} test "
        f"instances x {plan.samples} sample(s); every claim planned at a spread of at least "
        f"{100 * plan.typical_spread:.1f} points):",
        "",
        "| claim | per-seed differences (points) | spread S | planned S | interval now | seeds needed "
        "(conservative) | seeds needed (optimistic) |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in plan.claims:
        diffs = ", ".join(f"{100 * d:+.1f}" for d in p.claim.diffs)
        centre = mean(p.claim.diffs)
        now = f"[{100 * (centre - p.half_width_now):+.1f}, {100 * (centre + p.half_width_now):+.1f}]"
        need = "decided (excludes 0)" if p.claim.decided else _seeds(p.seeds_conservative)
        lines.append(
            f"| {p.claim.name} | {diffs} | {100 * p.claim.spread:.1f} | {100 * p.planned_spread:.1f} | {now} | "
            f"{need} | {_seeds(p.seeds_optimistic)} |"
        )
    per_row = ", ".join(
        f"{row} {plan.row_seeds[row]} x {seconds / 60:.1f} min" for row, seconds in plan.row_seconds.items()
    )
    lines += [
        "",
        f"Planned seeds x cell time (one core, measured cells plus the added test episodes): {per_row}.",
        f"Table: {plan.hours:.1f} h on one core.",
    ]
    if plan.unreachable:
        lines.append(f"Out of reach at {MAX_SEEDS} seeds (reported as exploratory): {', '.join(plan.unreachable)}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="finished tables' results.json files")
    parser.add_argument("--target", type=float, default=100 * TARGET, help="half-width in points (default 5)")
    parser.add_argument(
        "--instances", type=int, default=112, help="planned test instances (Split-Calc's test split: 112)"
    )
    parser.add_argument("--samples", type=int, default=1, help="planned sampled episodes per test instance")
    parser.add_argument("--episode-s", type=float, help="seconds of one two-turn test episode (default: measured)")
    args = parser.parse_args(argv)
    tables = [json.loads(path.read_text()) for path in args.results]
    measured = [test_episode_s(t) for t in tables if any(r["row"] == "swapped" for r in t["results"])]
    episode_s = args.episode_s or (measured[0] if measured else None)  # a table without a swapped row borrows it
    typical = typical_spread(tables)  # over every table given: a 3-seed spread is too rough alone
    for results in tables:
        plan = plan_table(results, args.instances, args.samples, args.target / 100, episode_s, typical)
        print(markdown(plan, args.target / 100) + "\n")


if __name__ == "__main__":
    main()
