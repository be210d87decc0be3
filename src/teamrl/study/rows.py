"""The rows of a study table and the named studies (task config + rows + paired comparisons).

A row is one method or ablation. Its `kind` says how it is produced:
  eval:  the warmed-up base, untrained, evaluated (overrides pick the workflow);
  train: one `teamrl train` run from the seed's warm-up (overrides pick regime, grouping, ...);
  swap:  the `per_role` row's trained policies with the roles' policies exchanged, evaluated;
  alone: each role trained with the other roles frozen at the warm-up, then the trained roles
         evaluated together (the co-training ablation);
  bases: a per-role training run on two different bases (`teamrl.study.hetero_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

FROZEN_LR = 1e-12
"""A frozen role's learning rate in the `alone` rows (AdamW moves a weight by about lr per step, so
1e-12 leaves it unchanged to float32 precision; the config requires lr > 0)."""


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    key: str
    kind: str  # eval | train | swap | alone | bases
    label: str
    overrides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("eval", "train", "swap", "alone", "bases"):
            raise ValueError(f"row {self.key!r}: kind must be eval, train, swap, alone or bases, got {self.kind!r}")


ROWS: dict[str, Row] = {row.key: row for row in (
    Row("single", "eval", "single agent (untrained)", ("workflow.name=single",)),
    Row("single_grpo", "train", "single agent + GRPO", ("workflow.name=single",)),
    Row("team", "eval", "team (untrained)"),
    Row("shared", "train", "AT-GRPO shared", ("regime=shared",)),
    Row("per_role", "train", "AT-GRPO per-role", ("regime=per_role",)),
    Row("swapped", "swap", "per-role, policies swapped"),
    Row("alone", "alone", "roles trained alone, evaluated together"),
    # Trajectory grouping with each agent's own per-turn rewards (the ones tree grouping uses): one group
    # per (instance, agent) over K full episodes. With one answer per agent per episode it samples as many
    # responses as tree grouping at the same k (2 K per instance), so only the grouping differs.
    Row("trajectory", "train", "trajectory grouping (same rewards, same tokens)",
        ("algorithm.grouping=trajectory", "algorithm.trajectory_credit=own")),
    Row("hetero", "bases", "heterogeneous pair (Llama/chars + Qwen2/BPE)"),
    Row("homo_b", "bases", "homogeneous pair of base B (Qwen2/BPE)"),
)}

COMPARISONS: tuple[tuple[str, str, str], ...] = (
    ("shared", "single_grpo", "AT-GRPO team vs single-agent GRPO"),
    ("shared", "team", "AT-GRPO shared vs untrained team"),
    ("per_role", "alone", "co-trained per-role vs trained alone"),
    ("per_role", "swapped", "per-role vs swapped roles"),
    ("shared", "trajectory", "tree vs trajectory grouping"),
    ("per_role", "shared", "per-role vs shared"),
    ("hetero", "per_role", "heterogeneous vs homogeneous pair of base A"),
    ("hetero", "homo_b", "heterogeneous vs homogeneous pair of base B"),
)
"""(row a, row b, question): paired per-seed differences a - b reported under the table."""


@dataclass(frozen=True)
class Study:
    """A named study: the task's config and the rows to run."""

    name: str
    config: Path
    rows: tuple[str, ...] = tuple(ROWS)


STUDIES: dict[str, Study] = {
    "split_nav": Study("split_nav", CONFIGS / "split_nav_team.yaml"),
    "split_calc": Study("split_calc", CONFIGS / "split_calc_team.yaml"),
}


def study(name: str) -> Study:
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; studies: {', '.join(sorted(STUDIES))}")
    return STUDIES[name]


def select_rows(names: list[str] | None) -> list[Row]:
    """The rows named (all when None), in table order; `swapped` needs `per_role` and pulls it in."""
    if not names:
        return list(ROWS.values())
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        raise ValueError(f"unknown study row(s) {', '.join(unknown)}; rows: {', '.join(ROWS)}")
    wanted = set(names) | ({"per_role"} if "swapped" in names else set())
    return [row for key, row in ROWS.items() if key in wanted]
