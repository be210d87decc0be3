"""Format learning or skill? Per role, the share of well-formed answers and the share of right ones, before
training and after, from a study folder's held-out transcripts.

Run: python -m scripts.study.real_format_skill runs/study-real_split_calc [--rows per_role shared]
     python -m scripts.study.real_format_skill OUT/plan --right-term goal     # Plan-Path's team
     python -m scripts.study.real_format_skill OUT/code --right-term gt_pass --episodes   # the code team

A small real model gains a lot by learning the answer's form alone (a SmolLM2 math team went 14% ->
94% mostly that way). Split-Calc's terms tell the two apart per role: `format` is negative when the answer
does not parse (the analyst's formula, the calculator's integer), and `team` is 1 when the role's own answer
is right (the analyst's formula equals the operation; the calculator's value is the instance's). Reported
per role: well-formed share, right share, and right among the well-formed. If training raised only the
first, the gain is format; if the last rose, the role got better at its task. Plan-Path's terms name the
right answer `goal` instead (`--right-term goal`): the tool's proposal reaches the goal, or the plan role's
moves (or its `follow` of a proposal) do.

`--episodes` adds a table per episode for workflows where a role answers over several turns (the code
team's coder rewrites its program after each round of the tester's tests): the share of episodes in which
the role was right at some turn, the share that succeeded at the end, and the share that lost a right answer
(right at some turn, failed at the end). A team that loses right answers to a later rewrite scores below
what its best turn wrote.

The source: every training run writes the first 8 episodes of each held-out evaluation
(`transcripts/eval_stepNNNNN.json`, validation split). So each cell here pools 8 episodes per seed: a
sample for direction, not a measurement to quote to a point.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from teamrl.diagnostics.rollout import well_formed


def role_counts(transcript: list[dict], right_term: str = "team") -> Counter:
    """(agent, 'n' | 'judged' | 'formed' | 'right' | 'right_formed') -> count over one evaluation's episodes.

    Well formed is the library's rule (`teamrl.diagnostics.rollout.well_formed`: `format_ok` where a
    workflow records it, else `format` >= 0); a turn whose terms say neither is not judged, so it counts
    in no well-formed share rather than as well formed."""
    counts: Counter = Counter()
    for episode in transcript:
        for turn in episode["turns"]:
            agent, terms = turn["agent"], turn.get("terms", {})
            verdict = well_formed(terms)
            right = terms.get(right_term, 0.0) >= 1.0
            counts[agent, "n"] += 1
            counts[agent, "right"] += right
            if verdict is not None:
                formed = verdict == 1.0
                counts[agent, "judged"] += 1
                counts[agent, "formed"] += formed
                counts[agent, "right_formed"] += right and formed
    return counts


def episode_counts(transcript: list[dict], right_term: str = "team") -> Counter:
    """(agent, 'episodes' | 'some' | 'success' | 'lost') -> count over one evaluation's episodes in which
    the agent answered: right at some turn, successful at the end, and right at some turn yet failed."""
    counts: Counter = Counter()
    for episode in transcript:
        for agent in dict.fromkeys(turn["agent"] for turn in episode["turns"]):
            right = any(t.get("terms", {}).get(right_term, 0.0) >= 1.0 for t in episode["turns"] if t["agent"] == agent)
            counts[agent, "episodes"] += 1
            counts[agent, "some"] += right
            counts[agent, "success"] += bool(episode["success"])
            counts[agent, "lost"] += right and not episode["success"]
    return counts


def episode_table(folder: Path, rows: list[str] | None, right_term: str = "team") -> str:
    """Per row and role: right at some turn, success at the end, and right answers lost, first -> last."""
    lines = [
        "| row | role | episodes (before/after) | right at some turn | success | lost a right answer |",
        "|---|---|---|---|---|---|",
    ]
    for row, runs in runs_by_row(folder, rows).items():
        pooled = row_summary(runs, right_term, episode_counts)
        first, last = pooled["first"], pooled["last"]
        for agent in sorted({agent for agent, _ in first}):
            some, success, lost = (
                f"{share(first, agent, w, 'episodes')} -> {share(last, agent, w, 'episodes')}"
                for w in ("some", "success", "lost")
            )
            lines.append(
                f"| {row} | {agent} | {first[agent, 'episodes']}/{last[agent, 'episodes']} | "
                f"{some} | {success} | {lost} |"
            )
    return "\n".join(lines)


def row_summary(
    runs: list[Path], right_term: str = "team", count: Callable[[list[dict], str], Counter] = role_counts
) -> dict[str, Counter]:
    """'first' / 'last' -> pooled counts (`count`: per turn, or `episode_counts`) over the runs' first and
    last held-out evaluations."""
    pooled: dict[str, Counter] = {"first": Counter(), "last": Counter()}
    for run in runs:
        evaluations = sorted((run / "transcripts").glob("eval_step*.json"))
        if len(evaluations) < 2:
            continue
        pooled["first"] += count(json.loads(evaluations[0].read_text()), right_term)
        pooled["last"] += count(json.loads(evaluations[-1].read_text()), right_term)
    return pooled


def share(counts: Counter, agent: str, what: str, of: str = "n") -> str:
    total = counts[agent, of]
    return f"{counts[agent, what] / total:.0%}" if total else "-"


def runs_by_row(folder: Path, rows: list[str] | None) -> dict[str, list[Path]]:
    """row -> its training runs with transcripts (folders ROW-sSEED; an interrupted ROW-sSEED.stopped-T is left out)."""
    by_row: dict[str, list[Path]] = {}
    for run in sorted((folder / "runs").iterdir()):
        named = re.fullmatch(r"(.+)-s\d+", run.name)
        row = named.group(1) if named else None
        if row is not None and (rows is None or row in rows) and (run / "transcripts").is_dir():
            by_row.setdefault(row, []).append(run)
    return by_row


def table(folder: Path, rows: list[str] | None, right_term: str = "team") -> str:
    by_row = runs_by_row(folder, rows)
    lines = [
        "| row | role | turns (before/after) | well-formed before -> after | right before -> after | "
        "right among well-formed before -> after |",
        "|---|---|---|---|---|---|",
    ]
    for row, runs in by_row.items():
        pooled = row_summary(runs, right_term)
        agents = sorted({agent for agent, _ in pooled["first"]})
        for agent in agents:
            first, last = pooled["first"], pooled["last"]
            lines.append(
                f"| {row} | {agent} | {first[agent, 'n']}/{last[agent, 'n']} | "
                f"{share(first, agent, 'formed', 'judged')} -> {share(last, agent, 'formed', 'judged')} | "
                f"{share(first, agent, 'right')} -> {share(last, agent, 'right')} | "
                f"{share(first, agent, 'right_formed', 'formed')} -> {share(last, agent, 'right_formed', 'formed')} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a study's output folder (its runs/ holds the training runs)")
    parser.add_argument("--rows", nargs="+", help="only these rows (run names ROW-sSEED)")
    parser.add_argument(
        "--right-term",
        default="team",
        help="the reward term that is 1 when a role's answer is right (Split-Calc: team; Plan-Path: goal)",
    )
    parser.add_argument(
        "--episodes",
        action="store_true",
        help="also per episode: right at some turn, success at the end, right answers lost",
    )
    args = parser.parse_args()
    if not (args.folder / "runs").is_dir():
        raise SystemExit(f"{args.folder} has no runs/ folder: give the --out folder of `teamrl study`")
    print(table(args.folder, args.rows, args.right_term))
    if args.episodes:
        print()
        print(episode_table(args.folder, args.rows, args.right_term))


if __name__ == "__main__":
    main()
