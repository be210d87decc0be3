"""Form or skill, per role, on a cell's test episodes: how many of a role's committed turns were well
formed, how many were right, and how many were both.

A small real model gains much by learning an answer's form alone, so a gain is read per role: a rise in
well-formed turns with no rise in right among the well-formed is form; a rise in the latter is skill.
Counts (not shares) are recorded so cells pool exactly over seeds.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from teamrl.diagnostics.rollout import well_formed
from teamrl.workflows.base import Workflow

RIGHT_TERMS = ("verdict_correct", "correct", "gt_pass", "team")
"""Per committed turn, the first of these terms present says whether the role's own answer was right
(evaluator: its verdict; math: its answer; coder: its program on the ground truth; Split-Calc and
Split-Nav: its part of the team's answer)."""


def role_form(workflow: Workflow, episodes: list[Any]) -> dict[str, dict[str, int]]:
    """role -> {turns, well_formed, right, right_formed} over the committed turns of `episodes`
    (`well_formed` and `right` only where the role's outcomes say so)."""
    role_of = {a.name: a.role for a in workflow.agents}
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for episode in episodes:
        for entry in episode.transcript:
            mine, terms = counts[role_of[entry["agent"]]], entry.get("terms", {})
            mine["turns"] += 1
            formed = well_formed(terms)
            term = next((t for t in RIGHT_TERMS if t in terms), None)
            right = term is not None and terms[term] >= 1.0
            if formed is not None:
                mine["well_formed"] += int(formed)
            if term is not None:
                mine["right"] += int(right)
                if formed is not None:
                    mine["right_formed"] += int(right and bool(formed))
    return {role: dict(c) for role, c in sorted(counts.items())}


def pooled(records: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """role -> the counts of `role_form` summed over cells' `roles` records."""
    total: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for record in records:
        for role, counts in record.get("roles", {}).items():
            for key, n in counts.items():
                total[role][key] += n
    return {role: dict(c) for role, c in total.items()}
