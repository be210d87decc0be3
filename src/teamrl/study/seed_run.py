"""One seed of a study: its own warmed-up base, the configs of its rows, and the rows it produces.

Per seed s: the tiny default is warmed up with warm-up seed `protocol.warmup_seed(s)`; every row of
that seed starts from it (so rows of one seed are paired). A trained row picks its best checkpoint
on the validation split (the training loop's held-out evaluation, `task.heldout_split=validation`)
and only that checkpoint is scored on the test split (`task.heldout_split=test`), sampled at the
config's evaluation temperature. A study on a named checkpoint (the `real_*` studies) has no
warm-up: every seed starts from that checkpoint, and seeds differ in their sampling and training
seeds and data order only.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from teamrl.config import ConfigError, RunConfig, load_config
from teamrl.policies.loading import Policy
from teamrl.rollout.agent_params import agent_sampling
from teamrl.rollout.evaluation import evaluate
from teamrl.setup.team import build_policies, build_workflow, policies_from_checkpoint
from teamrl.setup.threads import threads_set
from teamrl.setup.tiny_default import WarmupRecipe, warm_up
from teamrl.study.progress import cell_progress
from teamrl.study.protocol import Protocol, mean_pass_at_k
from teamrl.study.role_form import role_form
from teamrl.study.rows import FROZEN_LR, ROWS, Row, Study
from teamrl.training.loop import train
from teamrl.workflows.base import role_names

logger = logging.getLogger(__name__)

Log = Callable[[str], None]
RowProducer = Callable[["SeedRun", Row], dict[str, Any]]
"""Produces one row of a seed: its result fields (test success and the row's own)."""


def row_config(
    study: Study,
    protocol: Protocol,
    row_overrides: list[str] | tuple[str, ...],
    seed: int,
    out: Path,
    run_name: str,
    overrides: list[str],
    split: str = "validation",
) -> RunConfig:
    """The run config of one row and seed: the study's config and settings, the user's overrides, the row's own.

    Every held-out evaluation of a trained row scores all `protocol.validation_instances` (the training
    loop's default scores the first 50 between the first and the last evaluation): the best checkpoint is
    picked on the whole validation split.
    """
    fixed = [
        f"seed={seed}",
        f"output_dir={out / 'runs'}",
        f"run_name={run_name}",
        f"task.heldout_split={split}",
        f"train.eval_instances={protocol.validation_instances}",
        "train.midway_eval_instances=0",
    ]
    budget = study.budget.overrides() if study.budget else ()
    return load_config(
        study.config, [*study.overrides, *budget, *overrides, *row_overrides, *study.model_overrides(), *fixed]
    )


def seed_base(config: RunConfig, warmup_seed: int, verbose: bool) -> str:
    """The seed's warmed-up tiny default (cached per recipe), for the team and single workflows alike."""
    if config.policy.model != "tiny-default":
        return config.policy.model  # a given model has no warm-up: seeds differ in sampling only
    recipe = WarmupRecipe.for_task(
        config.task, config.workflow.max_turns, "team", steps=config.policy.warmup_sft_steps, seed=warmup_seed
    )
    return str(warm_up(recipe, verbose=verbose))


def sampled_outcomes(
    config: RunConfig,
    policies: dict[str, Policy],
    mapping: dict[str, str],
    instances: int,
    samples: int,
    seed: int,
    what: str = "held-out",
    roles: dict[str, dict[str, int]] | None = None,
) -> list[list[bool]]:
    """Per held-out instance, the success of each of `samples` episodes (evaluation sampling settings).
    Each pass over the instances logs a `held-out scoring:` record naming `what`, which a running cell's
    progress forwards: an untrained row is nothing but these passes, and a test scoring can take minutes.
    roles: filled with each role's form and rightness over every episode (`teamrl.study.role_form`)."""
    workflow = build_workflow(config)
    sampling = agent_sampling(config.rollout, workflow.agents, "eval")
    outcomes: list[list[bool]] = [[] for _ in range(instances)]
    scored = []
    for sample in range(samples):
        started = time.time()
        _, episodes = evaluate(workflow, policies, mapping, instances, seed=seed * 1000 + sample, sampling=sampling)
        if roles is not None:
            scored += episodes
        for i, episode in enumerate(episodes):
            outcomes[i].append(bool(episode.success))
        logger.info(
            "held-out scoring: %s, pass %d/%d: success %.3f on %d instances, %.0f s",
            what,
            sample + 1,
            samples,
            sum(outcome[-1] for outcome in outcomes) / max(instances, 1),
            instances,
            time.time() - started,
        )
    if roles is not None:
        roles.update(role_form(workflow, scored))
    return outcomes


def base_rates(
    sampled: RunConfig, greedy: RunConfig, model_path: str, instances: int, k: int, seed: int
) -> dict[str, float]:
    """The untrained base on the held-out split of `sampled` (validation): pass@1 and pass@k (k episodes
    per instance, `sampled`'s evaluation temperature) and success under `greedy`'s (temperature 0)."""
    policies, mapping = build_policies(sampled, build_workflow(sampled), model_path)
    outcomes = sampled_outcomes(sampled, policies, mapping, instances, k, seed, "validation, sampled")
    greedy_success = sampled_outcomes(greedy, policies, mapping, instances, 1, seed, "validation, greedy")
    return {
        "pass@1": mean_pass_at_k(outcomes, 1),
        f"pass@{k}": mean_pass_at_k(outcomes, k),
        "greedy": sum(o[0] for o in greedy_success) / instances,
        "k": k,
        "instances": instances,
        "temperature": sampled.rollout.eval_temperature,
    }


def curve(run_dir: Path) -> list[tuple[int, float]]:
    """(step, validation success) of every held-out evaluation a run logged."""
    points = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("eval/success") is not None:
            points.append((int(record["step"]), float(record["eval/success"])))
    return points


def test_policies(
    config: RunConfig, checkpoint: Path | None, model_path: str
) -> tuple[dict[str, Policy], dict[str, str]]:
    workflow = build_workflow(config)
    if checkpoint is None:
        return build_policies(config, workflow, model_path)
    return policies_from_checkpoint(config, workflow, checkpoint)


class SeedRun:
    """The rows of one seed, from one warm-up; keeps the per-role run for the swapped row."""

    def __init__(
        self,
        study: Study,
        protocol: Protocol,
        seed: int,
        out: Path,
        overrides: list[str],
        log: Log,
        verbose: bool = False,
        row_kinds: Mapping[str, RowProducer] | None = None,
    ) -> None:
        """row_kinds: producers of the row kinds beyond this class's own (eval, train, swap, alone,
        transfer), by kind (`teamrl.study.runner.ROW_KINDS`)."""
        self.study, self.protocol, self.seed, self.out, self.overrides, self.log = (
            study,
            protocol,
            seed,
            out,
            overrides,
            log,
        )
        self.verbose = verbose
        self.row_kinds = dict(row_kinds or {})
        team = self.config(Row("team", "eval", ""))
        warmed = team.policy.model == "tiny-default"  # as `seed_base` decides: a named model is used as it is
        if warmed:
            log(f"seed {seed}: warm-up seed {protocol.warmup_seed(seed)} (cached after the first time)")
        self.model_path = seed_base(team, protocol.warmup_seed(seed), verbose)
        log(f"seed {seed}: base model {self.model_path}" + ("" if warmed else " (no warm-up)"))
        self.trained: dict[str, Path] = {}
        self.shared: dict[str, Any] = {}  # what several rows of this seed reuse (e.g. the hetero rows' bases)
        self.fingerprints: dict[str, Any] = {}  # run name -> its fingerprint, for the cell being made
        self.run_bases: dict[str, str] = {}  # run name -> the base model it trained from (--check-bits replays it)

    def note_run(self, run_dir: Path, model_path: str) -> None:
        """Keep a finished training run's fingerprint and base for the cell's record (teamrl.training.fingerprint)."""
        summary = json.loads((run_dir / "summary.json").read_text())
        if "fingerprint" in summary:
            self.fingerprints[run_dir.name] = summary["fingerprint"]
            self.run_bases[run_dir.name] = model_path

    def config(self, row: Row, extra: tuple[str, ...] = (), split: str = "validation", name: str = "") -> RunConfig:
        return row_config(
            self.study,
            self.protocol,
            [*row.overrides, *extra],
            self.seed,
            self.out,
            name or f"{row.key}-s{self.seed}",
            self.overrides,
            split,
        )

    def test(
        self, row: Row, extra: tuple[str, ...], checkpoint: Path | None, with_roles: bool = False
    ) -> dict[str, Any]:
        """The test split's success; with_roles adds each role's form and rightness (`roles`), which only
        rows first recorded with it ask for (a re-run cell must give the fields its record has)."""
        test_config = self.config(row, extra, split="test")
        policies, mapping = test_policies(test_config, checkpoint, self.model_path)
        roles: dict[str, dict[str, int]] | None = {} if with_roles else None
        outcomes = sampled_outcomes(
            test_config,
            policies,
            mapping,
            self.protocol.test_instances,
            self.protocol.test_samples,
            10_000 + self.seed,
            "test",
            roles,
        )
        k = self.protocol.test_samples
        found = {"test_success": mean_pass_at_k(outcomes, 1), f"test_pass@{k}": mean_pass_at_k(outcomes, k)}
        return found | ({"roles": roles} if roles is not None else {})

    def run(self, row: Row) -> dict[str, Any]:
        started = time.time()
        result: dict[str, Any] = {
            "row": row.key,
            "label": self.study.label(row),
            "seed": self.seed,
            "warmup_seed": self.protocol.warmup_seed(self.seed),
        }
        own = {
            "eval": self._eval,
            "train": self._train,
            "swap": self._swap,
            "alone": self._alone,
            "transfer": self._transfer,
        }
        if row.kind not in own and row.kind not in self.row_kinds:
            raise ConfigError(
                f"row {row.key!r} is of kind {row.kind!r}, which this study run cannot produce; "
                f"known kinds: {', '.join([*own, *self.row_kinds])}"
            )
        self.log(f"seed {self.seed} {result['label']}: started")
        self.fingerprints, self.run_bases = {}, {}
        # The whole cell at the study's train.threads, its evaluations and test scoring too: the training loop
        # applies it only while it trains, and torch's default (every core) in two study processes on two
        # cores put two OpenMP teams on each core, whose spinning barriers slowed every test scoring.
        with cell_progress(self.log, f"  seed {self.seed} {row.key}: "), threads_set(self.config(row).train.threads):
            result.update(own[row.kind](row) if row.kind in own else self.row_kinds[row.kind](self, row))
        if self.fingerprints:  # the runs this cell trained, bit for bit (the code check compares them)
            result["fingerprints"], result["run_bases"] = self.fingerprints, self.run_bases
        result["seconds"] = time.time() - started
        self.log(
            f"seed {self.seed} {result['label']}: test success {result['test_success']:.1%} ({result['seconds']:.0f}s)"
        )
        return result

    def _eval(self, row: Row) -> dict[str, Any]:
        sampled = self.config(row)
        greedy = self.config(row, ("rollout.eval_temperature=0.0",))
        rates = base_rates(
            sampled, greedy, self.model_path, self.protocol.validation_instances, sampled.algorithm.k, self.seed
        )
        return self.test(row, (), None) | {"base": rates}

    def _train_one(self, row: Row, extra: tuple[str, ...] = (), name: str = "") -> tuple[RunConfig, Path]:
        config = self.config(row, extra, name=name)
        stale = Path(config.output_dir) / config.run_name
        if stale.is_dir():
            # A run of a row that results.json does not hold: the study stopped during it. Keep it, aside.
            stale.rename(stale.with_name(f"{stale.name}.stopped-{int(time.time())}"))
        run_dir = train(config, model_path=self.model_path, progress=self.verbose)
        self.note_run(run_dir, self.model_path)
        return config, run_dir

    def _train(self, row: Row, extra: tuple[str, ...] = ()) -> dict[str, Any]:
        _, run_dir = self._train_one(row, extra)
        self.trained[row.key] = run_dir
        summary = json.loads((run_dir / "summary.json").read_text())
        return self.test(row, extra, run_dir / "checkpoints" / "best") | {
            "validation_initial": summary["initial_success"],
            "validation_best": summary["best_success"],
            "best_step": summary["best_step"],
            "curve": curve(run_dir),
            "run_dir": str(run_dir),
        }

    def _roles(self) -> list[str]:
        return role_names(build_workflow(self.config(Row("team", "eval", ""))))

    def _swap(self, row: Row) -> dict[str, Any]:
        if "per_role" not in self.trained:
            raise ConfigError("the swapped row needs the per_role row of the same seed: add per_role to --rows")
        roles = self._roles()
        swapped = dict(zip(roles, roles[1:] + roles[:1]))  # each role gets the next role's trained policy
        extra = tuple(f"policies.{r}={{}}" for r in roles) + tuple(f"roles.{r}={p}" for r, p in swapped.items())
        return self.test(row, extra, self.trained["per_role"] / "checkpoints" / "best") | {"swapped": swapped}

    def _alone(self, row: Row) -> dict[str, Any]:
        roles = self._roles()
        together = self.out / "runs" / f"alone-s{self.seed}-together"
        together.mkdir(parents=True, exist_ok=True)
        curves = {}
        for role in roles:
            frozen = tuple(f"policies.{r}={{lr: {FROZEN_LR}, weight_decay: 0.0}}" for r in roles if r != role)
            _, run_dir = self._train_one(row, ("regime=per_role", *frozen), name=f"alone-{role}-s{self.seed}")
            link = together / role
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to((run_dir / "checkpoints" / "best" / role).resolve(), target_is_directory=True)
            curves[role] = curve(run_dir)
        return self.test(row, ("regime=per_role",), together) | {"curves_alone": curves}

    def _transfer(self, row: Row) -> dict[str, Any]:
        checkpoint = None
        if row.source:
            if row.source not in self.trained:
                raise ConfigError(f"the {row.key} row needs the {row.source} row of the same seed: add it to --rows")
            checkpoint = self.trained[row.source] / "checkpoints" / "best"
        extra = transfer_overrides(self.study, row)
        return self.test(row, extra, checkpoint, with_roles=True) | {"variant": list(self.study.transfer)}


def transfer_overrides(study: Study, row: Row) -> tuple[str, ...]:
    """A transfer row's test overrides: its source row's own (the regime its checkpoint was trained in: a
    shared checkpoint has one policy folder, a per-role one a folder per role), then the study's variant."""
    source = ROWS[row.source].overrides if row.source else ()
    return (*source, *study.transfer)
