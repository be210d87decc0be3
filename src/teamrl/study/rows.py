"""The rows of a study table and the named studies (task config + rows + paired comparisons).

A row is one method or ablation. Its `kind` says how it is produced:
  eval:  the warmed-up base, untrained, evaluated (overrides pick the workflow);
  train: one `teamrl train` run from the seed's warm-up (overrides pick regime, grouping, ...);
  swap:  the `per_role` row's trained policies with the roles' policies exchanged, evaluated;
  alone: each role trained with the other roles frozen at the warm-up, then the trained roles
         evaluated together (the co-training ablation);
  sft:   offline SFT on strong scripted transcripts from the seed's warm-up (`teamrl.study.sft_row`).
  bases: a per-role training run on two different bases (`teamrl.study.hetero_rows`).
  flows: every study workflow x policy regime on Split-Calc content (`teamrl.study.flow_rows`).
  transfer: the `source` row's trained policies (the untrained base when `source` is empty) scored on
         the test split of the study's unseen variant (`Study.transfer`: a larger size, other content).
  scale: voting and evaluator-optimizer x shared / per-agent at one model scale (`teamrl.study.scale_rows`).

The real-model studies (`real_*`, docs/study/real.md) start every seed from a named checkpoint (no
warm-up) and size their tables with `teamrl.study.real_budget`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from teamrl.study.real_budget import Budget

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

FROZEN_LR = 1e-12
"""A frozen role's learning rate in the `alone` rows (AdamW moves a weight by about lr per step, so
1e-12 leaves it unchanged to float32 precision; the config requires lr > 0)."""


KINDS = ("eval", "train", "swap", "alone", "sft", "bases", "transfer", "flows", "scale")


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    key: str
    kind: str  # eval | train | swap | alone | sft | bases | transfer | flows | scale
    label: str
    overrides: tuple[str, ...] = ()
    source: str = ""
    """transfer rows: the trained row whose best checkpoint is scored (empty: the untrained base)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"row {self.key!r}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")


ROWS: dict[str, Row] = {
    row.key: row
    for row in (
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
        Row(
            "trajectory",
            "train",
            "trajectory grouping (same rewards, same tokens)",
            ("algorithm.grouping=trajectory", "algorithm.trajectory_credit=own"),
        ),
        Row("sft", "sft", "offline SFT on strong scripted transcripts"),
        Row("hetero", "bases", "heterogeneous pair (Llama/chars + Qwen2/BPE)"),
        Row("homo_b", "bases", "homogeneous pair of base B (Qwen2/BPE)"),
        Row("team_transfer", "transfer", "team (untrained), unseen variant"),
        Row(
            "single_grpo_transfer",
            "transfer",
            "single agent + GRPO, unseen variant",
            ("workflow.name=single",),
            source="single_grpo",
        ),
        Row("shared_transfer", "transfer", "AT-GRPO shared, unseen variant", source="shared"),
        Row(
            "flows",
            "flows",
            "study workflows x regimes (voting shared; all: python -m teamrl.study.flow_report)",
        ),
        Row(
            "flows_hot",
            "flows",
            "study workflows x regimes at 10x the lr, with mitigations (voting shared)",
            ("policy.lr=1e-3",),
        ),
        # The policy-sharing paper's scale axis (real_scale_calc): one row per model, the same calc_flows content
        # and budget. The tiny default reads compact prompts (its warm-up's); the real models chat prompts.
        Row(
            "scale_tiny",
            "scale",
            "scale: tiny character model (0.87M)",
            ("policy.model=tiny-default", "workflow.prompt_style=compact", "policy.lora=null"),
        ),
        Row("scale_smollm2", "scale", "scale: SmolLM2-135M-Instruct", ("policy.model=smollm2-135m-instruct",)),
        # Gemma-3-270M is a base model: its answers end at the blank line before the next worked example.
        Row("scale_gemma", "scale", "scale: Gemma-3-270M", ("policy.model=gemma-3-270m", 'rollout.stop=["\\n\\n"]')),
    )
}

COMPARISONS: tuple[tuple[str, str, str], ...] = (
    ("shared", "single_grpo", "AT-GRPO team vs single-agent GRPO"),
    ("shared", "team", "AT-GRPO shared vs untrained team"),
    ("per_role", "alone", "co-trained per-role vs trained alone"),
    ("per_role", "swapped", "per-role vs swapped roles"),
    ("shared", "trajectory", "tree vs trajectory grouping"),
    ("per_role", "shared", "per-role vs shared"),
    ("shared", "sft", "RL vs offline SFT"),
    ("hetero", "per_role", "heterogeneous vs homogeneous pair of base A"),
    ("hetero", "homo_b", "heterogeneous vs homogeneous pair of base B"),
    ("shared_transfer", "team_transfer", "transfer: AT-GRPO shared vs untrained team, unseen variant"),
    ("shared_transfer", "single_grpo_transfer", "transfer: AT-GRPO team vs single-agent GRPO, unseen variant"),
)
"""(row a, row b, question): paired per-seed differences a - b reported under the table. Each is put so
that the papers claim a beats b, except those in UNDIRECTED."""

UNDIRECTED: frozenset[tuple[str, str]] = frozenset({("per_role", "shared")})
"""Comparisons the papers make no one-way claim on (AT-GRPO's per-role policies beat shared on most
benchmarks and lose on some)."""


def named_model(overrides: tuple[str, ...] | list[str]) -> str:
    """The model the last `policy.model=` among `overrides` names ("" when none does: later overrides win)."""
    return next((o.split("=", 1)[1] for o in reversed(overrides) if o.startswith("policy.model=")), "")


@dataclass(frozen=True)
class Study:
    """A named study: the task's config and the rows to run."""

    name: str
    config: Path
    transfer: tuple[str, ...] = ()
    """Overrides that make the unseen variant the transfer rows are scored on (none: no transfer rows)."""
    transfer_label: str = ""
    """What the variant is, for the table."""
    heterogeneous: bool = False
    """Whether the `bases` rows (a second base of another architecture, `teamrl.study.hetero_rows`) apply:
    base B's tokenizer and warm-up are built for this task."""
    flows: bool = False
    """Whether this is a study of the study workflows (the `flows` rows only; `teamrl.study.flow_rows`)."""
    overrides: tuple[str, ...] = ()
    """The study's own settings on top of its config (the user's overrides and --quick's come after them)."""
    rows: tuple[str, ...] = ()
    """The only rows this study runs (empty: every row its kinds allow)."""
    base_b: str = ""
    """The `bases` rows' base B as a named checkpoint or folder (empty: the warmed-up Qwen2 variant)."""
    labels: tuple[tuple[str, str], ...] = ()
    """(row, label) pairs naming rows for this study (e.g. which models the hetero pair mixes)."""
    budget: Budget | None = None
    """The planned full table (its overrides, seeds and split sizes; `teamrl.study.real_budget`); None: the
    command's FULL protocol and the config's own training settings."""
    quick_budget: Budget | None = None
    """--quick's budget (it takes the full budget's place; `teamrl.study.command.planned`)."""
    model: str = ""
    """Set by `with_model`: every model this study names is replaced by this one (a smoke run)."""
    bound: float | None = None
    """The table's equivalence bound, planned before its run (a fraction: 0.1 is 10 points): a paired
    comparison whose 95% interval spans 0 inside [-bound, +bound] reads "no effect larger than" it
    (`teamrl.study.protocol.verdict`). Recorded in results.json when a table starts; None: no bound."""

    def with_model(self, model: str) -> Study:
        """This study with every model it names (the config's, base B's, each scale row's) replaced by
        `model`: the user's `policy.model=...` applies to the whole study, not only to the rows that do
        not name their own model."""
        return replace(self, model=model, base_b=model if self.base_b else "")

    def label(self, row: Row) -> str:
        return dict(self.labels).get(row.key, row.label)

    def model_overrides(self) -> tuple[str, ...]:
        """The overrides that come after a row's own (`with_model`'s model beats a scale row's)."""
        return (f"policy.model={self.model}",) if self.model else ()


SMOLLM2, GEMMA = "smollm2-135m-instruct", "gemma-3-270m"
REAL_SETTINGS = (
    f"policy.model={SMOLLM2}",
    "workflow.prompt_style=chat",
    "policy.lr=3.0e-4",
    "rollout.temperature=0.5",
    "rollout.eval_temperature=0.5",
    "train.warmup_steps=2",
)
"""The real-model studies' settings (those of configs/smollm2_math_team.yaml): chat prompts, and T 0.5,
at which SmolLM2 keeps a fair prior (T 1.0 ruins a 135M model's answers)."""
REAL_MAIN_ROWS = ("single", "single_grpo", "team", "shared", "per_role", "swapped", "alone", "trajectory", "sft")
# Sizes from teamrl.study.real_budget's prices (docs/study/real.md has the arithmetic): each full table
# plans under 6 h on one core, each --quick under 15 min.
REAL_MAIN = Budget(
    steps=12,
    batch_size=4,
    k=4,
    max_new_tokens=80,
    lora_rank=16,
    eval_every=6,
    validation_instances=32,
    test_instances=64,
    seeds=3,
)
REAL_QUICK = Budget(
    steps=2,
    batch_size=2,
    k=2,
    max_new_tokens=80,
    lora_rank=16,
    eval_every=0,
    validation_instances=6,
    test_instances=6,
    seeds=1,
)
REAL_SCALE = Budget(
    steps=4,
    batch_size=2,
    k=4,
    max_new_tokens=80,
    lora_rank=16,
    eval_every=0,
    validation_instances=16,
    test_instances=32,
    seeds=3,
)
REAL_SCALE_QUICK = Budget(
    steps=1,
    batch_size=1,
    k=2,
    max_new_tokens=80,
    lora_rank=16,
    eval_every=0,
    validation_instances=2,
    test_instances=2,
    seeds=1,
    tiny_warmup_steps=50,
)

REAL_MATH = replace(REAL_MAIN, steps=24, eval_every=8, test_instances=128, seeds=7)
"""The math team's table: the main job's 24 steps, where its held-out success levels off (83-93% on 9
runs of three settings, std 3.4, against 68-90% and std 7 at step 16: benchmarks/results/main_job_settings),
and 7 seeds, the plan's size for a claim of S 5 (docs/study/real.md, the math table's plan)."""

REAL_PLAN = replace(REAL_MAIN, max_new_tokens=40, validation_instances=16, seeds=5)
"""The planning table: the main table's 12 steps held out every 6 and its 64 test grids, 16 validation grids
and 5 seeds, with Plan-Path's response cap (a program calling the helper, `follow` or a move string). A
Gemma-3 team episode with the worked examples costs about 8 s of a shared core (its --quick cells), so the
math table's sizes (24 steps, 32 validation, 128 test, 7 seeds) would cost about 40 core-hours
(docs/study/real.md, the planning table's plan)."""

REAL_CODE = replace(REAL_MAIN, max_new_tokens=160, seeds=5)
"""The code table: the main table's 12 steps, 32 validation and 64 test problems, 5 seeds, with the code
team's response cap (a function in a ```python block, or a tester's asserts: 160 tokens, as its base rate)."""

REAL_FLOWS_LONG = replace(REAL_SCALE, steps=24, eval_every=4)
"""The policy-sharing paper at real scale: the scale table's budget run six times as long, held out every 4
steps, so a late cliff (a fall after a peak) and peak vs final show over training, not at two points."""

REAL_BOUND = 0.10
"""The real tables' equivalence bound, 10 points, planned with their seeds (docs/study/real.md, the plan): the
plan sizes a table for a 95% half-width under 5 points, so a null effect's interval falls inside ±10 in
about 95% of tables (its centre within one half-width of 0)."""

REAL_STUDIES: dict[str, Study] = {
    # (1) the AT-GRPO table on SmolLM2: Split-Calc's analyst sees only the operation, the calculator only the
    # operands, so neither can answer alone; the team's prior is fair (docs/study/real.md: why not math).
    "real_split_calc": Study(
        "real_split_calc",
        CONFIGS / "split_calc_team.yaml",
        overrides=REAL_SETTINGS,
        rows=REAL_MAIN_ROWS,
        budget=REAL_MAIN,
        quick_budget=REAL_QUICK,
        bound=REAL_BOUND,
    ),
    # (1b) the same table on Gemma-3-270M, a base model (no chat template): its answers end at the blank line
    # before the next worked example, as in the hetero table's Gemma roles and the scale table's Gemma row.
    "real_split_calc_gemma": Study(
        "real_split_calc_gemma",
        CONFIGS / "split_calc_team.yaml",
        overrides=(*REAL_SETTINGS, f"policy.model={GEMMA}", 'rollout.stop=["\\n\\n"]'),
        rows=REAL_MAIN_ROWS,
        budget=REAL_MAIN,
        quick_budget=REAL_QUICK,
        bound=REAL_BOUND,
    ),
    # (1c) the paper's math team at real scale: SmolLM2's reasoner + Python-tool pair on three-term arithmetic
    # (level 2), against the reasoner alone trained with GRPO; checkpoints picked on the held-out list's first
    # half, reported on its second (`task.heldout_split`). The unseen variant is level 4, one-sentence word
    # problems: no training instance is a sentence, and the tool was trained on bare expressions.
    "real_math_team": Study(
        "real_math_team",
        CONFIGS / "smollm2_math_team.yaml",
        overrides=REAL_SETTINGS,
        rows=("single", "single_grpo", "team", "shared", "per_role", "team_transfer", "shared_transfer"),
        transfer=("task.source=arithmetic:4",),
        transfer_label="arithmetic level 4, word problems (trained on level 2, bare expressions)",
        budget=REAL_MATH,
        quick_budget=REAL_QUICK,
        bound=REAL_BOUND,
    ),
    # (1d) the paper's planning team at real scale: Gemma-3-270M's tool + plan pair on 6x6 Plan-Path with two
    # solved 4x4 grids shown (sampled prior 35%; the plan role alone 0%), against the plan role alone with
    # GRPO; 256 held-out grids halved into validation and test (`task.heldout_split`).
    "real_plan_path": Study(
        "real_plan_path",
        CONFIGS / "plan_path_team.yaml",
        overrides=(
            *REAL_SETTINGS,
            f"policy.model={GEMMA}",
            'rollout.stop=["\\n\\n"]',
            "task.worked_examples=true",
            "task.heldout_instances=256",
        ),
        rows=("single", "single_grpo", "team", "shared", "per_role"),
        budget=REAL_PLAN,
        quick_budget=REAL_QUICK,
        bound=REAL_BOUND,
    ),
    # (1e) the paper's code team at real scale: SmolLM2's coder + unit tester on the procedural harder level
    # (list and string functions with a parameter; sampled prior 12.5%, pass@4 33%), against the coder alone
    # with GRPO; held-out problems halved by content into validation and test (`task.heldout_split`).
    "real_code_team": Study(
        "real_code_team",
        CONFIGS / "code_team.yaml",
        overrides=(*REAL_SETTINGS, "task.source=procedural:lists"),
        rows=("single", "single_grpo", "team", "shared", "per_role"),
        budget=REAL_CODE,
        quick_budget=replace(REAL_QUICK, max_new_tokens=160),
        bound=REAL_BOUND,
    ),
    # (2) the heterogeneous pair: SmolLM2 (base A, the per_role row's pair) + Gemma-3-270M (base B).
    "real_hetero_calc": Study(
        "real_hetero_calc",
        CONFIGS / "split_calc_team.yaml",
        overrides=REAL_SETTINGS,
        heterogeneous=True,
        base_b=GEMMA,
        rows=("per_role", "hetero", "homo_b"),
        labels=(
            ("per_role", "homogeneous pair of SmolLM2 (per-role)"),
            ("hetero", "heterogeneous pair (SmolLM2 + Gemma-3-270M)"),
            ("homo_b", "homogeneous pair of Gemma-3-270M (per-role)"),
        ),
        budget=REAL_MAIN,
        quick_budget=REAL_QUICK,
        bound=REAL_BOUND,
    ),
    # (3) the policy-sharing paper's scale axis on calc_flows content (the scale rows name their models).
    "real_scale_calc": Study(
        "real_scale_calc",
        CONFIGS / "calc_flows.yaml",
        overrides=REAL_SETTINGS,
        rows=("scale_tiny", "scale_smollm2", "scale_gemma"),
        budget=REAL_SCALE,
        quick_budget=REAL_SCALE_QUICK,
        bound=REAL_BOUND,
    ),
    # (4) the policy-sharing paper on Gemma-3-270M (the scale table's model with a fair voting prior), long runs.
    "real_flows_gemma": Study(
        "real_flows_gemma",
        CONFIGS / "calc_flows.yaml",
        overrides=REAL_SETTINGS,
        rows=("scale_gemma",),
        budget=REAL_FLOWS_LONG,
        quick_budget=REAL_SCALE_QUICK,
        bound=REAL_BOUND,
    ),
}

STUDIES: dict[str, Study] = {
    "split_nav": Study("split_nav", CONFIGS / "split_nav_team.yaml"),
    # Trained on operands 1..9; the variant draws them from 1..15, so 64% of its instances have an operand
    # of two digits, which no training (or warm-up) instance has. No test instance is a training one.
    "split_calc": Study(
        "split_calc",
        CONFIGS / "split_calc_team.yaml",
        transfer=("task.max_operand=15",),
        transfer_label="operands 1..15 (trained on 1..9)",
        heterogeneous=True,
    ),
    # The matrix runs 60 steps (late behaviour), evaluates every 5 (a cliff's onset and an alert's lead time
    # are known to 5 steps) and logs gradient cosines and output diversity (the echo-chamber alert's inputs).
    "workflows_calc": Study(
        "workflows_calc",
        CONFIGS / "calc_flows.yaml",
        flows=True,
        overrides=("train.steps=60", "train.eval_every=5", "diagnostics.level=full"),
    ),
    **REAL_STUDIES,
}


def study(name: str) -> Study:
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; studies: {', '.join(sorted(STUDIES))}")
    return STUDIES[name]


def select_rows(names: list[str] | None, chosen: Study | None = None) -> list[Row]:
    """The rows named (all when None), in table order. A row that needs another pulls it in (`swapped`
    needs `per_role`, a transfer row its source); transfer rows need a study with a transfer variant,
    `bases` rows a study with a heterogeneous pair."""
    if chosen is not None and chosen.rows:
        return _study_rows(names, chosen)
    missing = {"scale"}
    if chosen is not None and not chosen.transfer:
        missing.add("transfer")
    if chosen is not None and not chosen.heterogeneous:
        missing.add("bases")
    if chosen is not None:  # the flows row is a study of its own: never beside the other rows
        missing |= {row.kind for row in ROWS.values() if (row.kind == "flows") != chosen.flows}
    if not names:
        return [row for row in ROWS.values() if row.kind not in missing]
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        raise ValueError(f"unknown study row(s) {', '.join(unknown)}; rows: {', '.join(ROWS)}")
    wanted = set(names) | ({"per_role"} if "swapped" in names else set())
    wanted |= {ROWS[n].source for n in names if ROWS[n].source}
    refused = sorted(n for n in wanted if ROWS[n].kind in missing)
    if refused and chosen is None:  # only the scale rows: they exist only in the studies that list them
        owners = sorted(s.name for s in STUDIES.values() if set(refused) & set(s.rows))
        raise ValueError(
            f"row(s) {', '.join(refused)} run only in the study that lists them ({', '.join(owners)}); pass that study"
        )
    if refused:
        assert chosen is not None  # every kind in `missing` but "scale" is added for a chosen study only
        rows_of = {
            "transfer": "transfer variant",
            "bases": "heterogeneous pair",
            "flows": "workflow matrix",
            "scale": "scale axis",
        }
        lacks = sorted({rows_of[ROWS[n].kind] for n in refused if ROWS[n].kind in rows_of})
        what = f"has no {' or '.join(lacks)} for" if lacks else "runs only the workflow matrix, not"
        raise ValueError(
            f"study {chosen.name!r} {what} row(s) {', '.join(refused)}; drop them "
            f"(this study's rows: {', '.join(r.key for r in select_rows(None, chosen))})"
        )
    return [row for key, row in ROWS.items() if key in wanted]


def _study_rows(names: list[str] | None, chosen: Study) -> list[Row]:
    """select_rows for a study with its own row list: the names must be in it (a row pulls in its sources)."""
    names = list(names or chosen.rows)
    refused = sorted(n for n in names if n not in chosen.rows)
    if refused:
        raise ValueError(
            f"study {chosen.name!r} has no row(s) {', '.join(refused)}; its rows: {', '.join(chosen.rows)}"
        )
    wanted = set(names) | ({"per_role"} if "swapped" in names else set())
    wanted |= {ROWS[n].source for n in names if ROWS[n].source}
    return [row for key, row in ROWS.items() if key in wanted]


def planned_bound(results: dict[str, Any]) -> tuple[float | None, bool]:
    """(the equivalence bound of a results file's table, whether it was recorded before the table ran).

    A file started before bounds existed gets its study's bound now, marked as set after the run."""
    if "planned_bound" in results:
        return results["planned_bound"], True
    chosen = STUDIES.get(results.get("study", ""))
    return (chosen.bound if chosen else None), False


def bound_note(results: dict[str, Any]) -> str:
    """One sentence on the table's bound and when it was set ('' without one)."""
    bound, before = planned_bound(results)
    if bound is None:
        return ""
    when = (
        "planned before this table ran (recorded in results.json)"
        if before
        else "the study's bound, set after these cells ran: a 'no effect larger than' verdict here is post hoc"
    )
    return f"Equivalence bound: ±{100 * bound:g} points, {when}."
