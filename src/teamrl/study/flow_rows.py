"""The `flows` row of `teamrl study workflows_calc`: study workflow x policy regime on Split-Calc content.

Per seed and per workflow (`FLOW_WORKFLOWS`), the tiny default is warmed up on that workflow's scripted
agents (`teamrl.demos.calc_flows`; warm-up seed `protocol.warmup_seed(seed)`, cached), then:
  untrained:  the warmed-up base scored on the test split;
  <regime>:   one `teamrl train` run from that base per regime of `FLOW_REGIMES` that maps the
              workflow's agents to policies differently from the regimes before it (debate has one
              role, so per_role is shared; evaluator-optimizer has one agent per role, so per_agent is
              per_role): the best checkpoint on validation, scored on the test split.
Every cell records the test success (sampled at the evaluation temperature) and each role's accuracy
on those test episodes (`role_accuracy`); trained cells add their validation curve. The record's
`test_success` (the study table's one number) is the voting / shared cell's; `matrix` prints every
cell as mean and spread over seeds:

    python -m teamrl.study.flow_rows runs/study-workflows_calc/results.json
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING, Any

from teamrl.config.options import Regime
from teamrl.policies.mapping import preset_mapping
from teamrl.rollout.agent_params import agent_sampling
from teamrl.rollout.evaluation import evaluate
from teamrl.setup.team import build_workflow
from teamrl.setup.tiny_default import WarmupRecipe, warm_up
from teamrl.study.protocol import summarize
from teamrl.study.seed_run import curve, test_policies
from teamrl.training.loop import train
from teamrl.workflows.base import Workflow

if TYPE_CHECKING:
    from teamrl.study.rows import Row
    from teamrl.study.seed_run import SeedRun

FLOW_WORKFLOWS = ("voting", "evaluator_optimizer", "orchestrator_workers", "debate")
FLOW_REGIMES: tuple[Regime, ...] = ("shared", "per_role", "per_agent")
WORKFLOW_OVERRIDES = {"orchestrator_workers": ("rollout.by_role={orchestrator: {max_new_tokens: 24}}",)}
"""Config overrides of one workflow's cells (three formulas need more than the config's 10 characters)."""


def workflow_overrides(name: str) -> tuple[str, ...]:
    """The overrides that select workflow `name` for a cell (with its own settings, WORKFLOW_OVERRIDES)."""
    return (f"workflow.name={name}", *WORKFLOW_OVERRIDES.get(name, ()))


TEAM = "voting"
"""The calc_flows task's `team` workflow: the study runner's own warm-up is this workflow's."""
HEADLINE = ("voting", "shared")
"""The cell whose test success is the row's number in the study table."""
MITIGATIONS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    # (cell, overrides) added to the shared cell of each workflow in MITIGATED rows: the mitigation of the
    # failure mode that workflow can show (a dominant role among several roles on one policy; duplicated
    # agents that amplify each other) and a KL anchor against a cliff.
    "voting": (
        ("shared+role_balanced", ("regime=shared", "algorithm.role_balanced=true")),
        ("shared+damping", ("regime=shared", "algorithm.coherence_damping=0.3")),
        ("shared+kl", ("regime=shared", "algorithm.kl_coef=0.05")),
    ),
    "evaluator_optimizer": (("shared+role_balanced", ("regime=shared", "algorithm.role_balanced=true")),),
    "orchestrator_workers": (
        ("shared+role_balanced", ("regime=shared", "algorithm.role_balanced=true")),
        ("shared+kl", ("regime=shared", "algorithm.kl_coef=0.05")),
    ),
    # The control of debate's damping cell: damping scaled the debaters' gradient by 0.988 on average
    # (seeds 0-2 at 7feebb1), so this is the shared cell with its step made that much smaller.
    "debate": (
        ("shared+damping", ("regime=shared", "algorithm.coherence_damping=0.3")),
        ("shared+lr_matched", ("regime=shared", "policy.lr=9.88e-4")),
    ),
}
MITIGATED = ("flows_hot",)
"""The rows whose matrix adds the MITIGATIONS cells (where failures are likeliest: the higher lr)."""
ACCURACY_TERMS = ("verdict_correct", "correct")
"""Per committed turn, the first of these terms present is that role's accuracy (evaluator: its verdict;
answerers: their answer; aggregator: the answer it picked)."""


def distinct_regimes(workflow: Workflow) -> list[Regime]:
    """The regimes of `FLOW_REGIMES` whose agent -> policy grouping differs from every earlier one's."""
    seen, kept = [], []
    for regime in FLOW_REGIMES:
        mapping = preset_mapping(regime, workflow.agents)
        groups = sorted(sorted(a for a in mapping if mapping[a] == p) for p in set(mapping.values()))
        if groups not in seen:
            seen.append(groups)
            kept.append(regime)
    return kept


def role_accuracy(workflow: Workflow, episodes: list[Any]) -> dict[str, float]:
    """Per role, the share of its committed turns that were right (`ACCURACY_TERMS`), and for a role
    that picks among answers (`any_correct`) the share of its turns where a right answer was offered."""
    role_of = {a.name: a.role for a in workflow.agents}
    counts: dict[str, list[float]] = defaultdict(list)
    for episode in episodes:
        for entry in episode.transcript:
            role, terms = role_of[entry["agent"]], entry["terms"]
            term = next((t for t in ACCURACY_TERMS if t in terms), None)
            if term is not None:
                counts[role].append(float(terms[term]))
            if "any_correct" in terms:
                counts[f"{role}/offered"].append(float(terms["any_correct"]))
    return {key: mean(values) for key, values in sorted(counts.items())}


def workflow_base(seed_run: SeedRun, row: Row, workflow: str, reuse_team: bool = True) -> str:
    """The seed's warmed-up tiny default for `workflow` (each workflow imitates its own scripted team), or
    the row's named model as it is. reuse_team: the runner's base serves the team workflow (False for a
    row naming its own model, as the scale rows do)."""
    if workflow == TEAM and reuse_team:
        return seed_run.model_path  # the runner warmed the task's team workflow up already
    config = seed_run.config(row, (f"workflow.name={workflow}",))
    if config.policy.model != "tiny-default":
        return config.policy.model
    recipe = WarmupRecipe.for_task(
        config.task,
        config.workflow.max_turns,
        workflow,
        steps=config.policy.warmup_sft_steps,
        seed=seed_run.protocol.warmup_seed(seed_run.seed),
    )
    return str(warm_up(recipe, verbose=seed_run.verbose))


def test_cell(
    seed_run: SeedRun, row: Row, extra: tuple[str, ...], model_path: str, checkpoint: Path | None
) -> dict[str, Any]:
    """Test success and per-role accuracy of a base (checkpoint None) or a trained checkpoint."""
    config = seed_run.config(row, extra, split="test")
    workflow = build_workflow(config)
    policies, mapping = test_policies(config, checkpoint, model_path)
    sampling = agent_sampling(config.rollout, workflow.agents, "eval")
    episodes = []
    for sample in range(seed_run.protocol.test_samples):
        episodes += evaluate(
            workflow,
            policies,
            mapping,
            seed_run.protocol.test_instances,
            seed=(10_000 + seed_run.seed) * 1000 + sample,
            sampling=sampling,
        )[1]
    return {"test_success": mean(float(e.success) for e in episodes), "roles": role_accuracy(workflow, episodes)}


def train_cell(seed_run: SeedRun, row: Row, extra: tuple[str, ...], model_path: str, name: str) -> dict[str, Any]:
    """One training run from `model_path`; its best checkpoint (validation) scored on the test split."""
    config = seed_run.config(row, extra, name=name)
    stale = Path(config.output_dir) / config.run_name
    if stale.is_dir():  # the study stopped during this run: keep its folder, aside
        stale.rename(stale.with_name(f"{stale.name}.stopped-{int(time.time())}"))
    run_dir = train(config, model_path=model_path, progress=seed_run.verbose)
    seed_run.note_run(run_dir, model_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    best = test_cell(seed_run, row, extra, model_path, run_dir / "checkpoints" / "best")
    # The best step is the last one: `best` is `final` (the same weights, scored with the same seed).
    final = (
        best
        if summary["best_step"] == summary["steps"]
        else test_cell(seed_run, row, extra, model_path, run_dir / "checkpoints" / "final")
    )
    return best | {
        "test_final": final["test_success"],
        "roles_final": final["roles"],
        "validation_initial": summary["initial_success"],
        "validation_best": summary["best_success"],
        "best_step": summary["best_step"],
        "curve": curve(run_dir),
        "run_dir": str(run_dir),
    }


def produce(seed_run: SeedRun, row: Row) -> dict[str, Any]:
    """Every cell of the matrix for one seed: {workflow: {'untrained' | regime: cell}}."""
    cells: dict[str, dict[str, Any]] = {}
    for name in FLOW_WORKFLOWS:
        extra = workflow_overrides(name)
        model_path = workflow_base(seed_run, row, name)
        cells[name] = {"untrained": test_cell(seed_run, row, extra, model_path, None) | {"base": model_path}}
        regimes: list[tuple[str, tuple[str, ...]]]  # (cell, its overrides); a mitigation has several
        regimes = [(r, (f"regime={r}",)) for r in distinct_regimes(build_workflow(seed_run.config(row, extra)))]
        if row.key in MITIGATED:
            regimes += list(MITIGATIONS.get(name, ()))
        for cell, overrides in regimes:
            cells[name][cell] = train_cell(
                seed_run,
                row,
                (*extra, *overrides),
                model_path,
                f"{row.key}-{name}-{cell.replace('+', '-')}-s{seed_run.seed}",
            )
            seed_run.log(
                f"seed {seed_run.seed} {row.key} {name} {cell}: test {cells[name][cell]['test_success']:.1%} "
                f"(untrained {cells[name]['untrained']['test_success']:.1%})"
            )
    return {"test_success": cells[HEADLINE[0]][HEADLINE[1]]["test_success"], "cells": cells}


def matrix(results: dict[str, Any], row: str = "flows") -> str:
    """A markdown table of every cell of the `flows` row: test success mean ± std over seeds, and each
    role's test accuracy (mean over seeds)."""
    values: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in results["results"]:
        if record["row"] == row:
            for name, regimes in record["cells"].items():
                for regime, cell in regimes.items():
                    values[(name, regime)].append(cell)
    if not values:
        raise ValueError(f"no {row!r} row in these results: run `teamrl study workflows_calc` first")
    lines = ["| workflow | policies | test success | seeds | role accuracy (test) |", "|---|---|---|---|---|"]
    for (name, regime), cells in values.items():
        s = summarize([c["test_success"] for c in cells])
        spread = "" if s.std is None else f" ± {100 * s.std:.1f}"
        roles = defaultdict(list)
        for c in cells:
            for role, accuracy in c["roles"].items():
                roles[role].append(accuracy)
        shown = ", ".join(f"{role} {mean(v):.0%}" for role, v in roles.items())
        lines.append(f"| {name} | {regime} | {s.mean:.1%}{spread} | {s.n} | {shown} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m teamrl.study.flow_rows OUT/results.json")
    print(matrix(json.loads(Path(sys.argv[1]).read_text())))
