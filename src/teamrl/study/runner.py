"""Run a study: for each seed, warm up its own base, then produce every row, scoring on the test split.

Per seed s: the tiny default is warmed up with warm-up seed `protocol.warmup_seed(s)`; every row of
that seed starts from it (so rows of one seed are paired). A trained row picks its best checkpoint
on the validation split (the training loop's held-out evaluation, `task.heldout_split=validation`)
and only that checkpoint is scored on the test split (`task.heldout_split=test`), sampled at the
config's evaluation temperature. Results go to OUT/results.json, row by row as they finish, each
with its cell digest (`teamrl.study.cells`): a re-run skips finished cells, lists the rest with an
ETA and refuses a folder whose cells were made with another config or code. A study on a named
checkpoint (the `real_*` studies) has no warm-up: every seed starts from that checkpoint, and seeds
differ in their sampling and training seeds and data order only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teamrl.config import ConfigError, RunConfig, load_config
from teamrl.policies.loading import Policy
from teamrl.rollout.agent_params import agent_sampling
from teamrl.study import cells, flow_rows, hetero_rows, results_file, scale_rows
from teamrl.study.protocol import Protocol, mean_pass_at_k
from teamrl.study.rows import FROZEN_LR, ROWS, Row, Study
from teamrl.study.sft_row import sft_row
from teamrl.setup.team import build_policies, build_workflow, policies_from_checkpoint
from teamrl.rollout.evaluation import evaluate
from teamrl.training.loop import train
from teamrl.setup.tiny_default import WarmupRecipe, warm_up
from teamrl.workflows.base import role_names

Log = Callable[[str], None]


def row_config(study: Study, protocol: Protocol, row_overrides: list[str] | tuple[str, ...], seed: int,
               out: Path, run_name: str, overrides: list[str], split: str = "validation") -> RunConfig:
    """The run config of one row and seed: the study's config and settings, the user's overrides, the row's own.

    Every held-out evaluation of a trained row scores all `protocol.validation_instances` (the training
    loop's default scores the first 50 between the first and the last evaluation): the best checkpoint is
    picked on the whole validation split.
    """
    fixed = [f"seed={seed}", f"output_dir={out / 'runs'}", f"run_name={run_name}", f"task.heldout_split={split}",
             f"train.eval_instances={protocol.validation_instances}", "train.midway_eval_instances=0"]
    budget = study.budget.overrides() if study.budget else ()
    return load_config(study.config, [*study.overrides, *budget, *overrides, *row_overrides,
                                      *study.model_overrides(), *fixed])


def warm_base(config: RunConfig, warmup_seed: int, verbose: bool) -> str:
    """The seed's warmed-up tiny default (cached per recipe), for the team and single workflows alike."""
    if config.policy.model != "tiny-default":
        return config.policy.model  # a given model has no warm-up: seeds differ in sampling only
    recipe = WarmupRecipe.for_task(config.task, config.workflow.max_turns, "team",
                                   steps=config.policy.warmup_sft_steps, seed=warmup_seed)
    return str(warm_up(recipe, verbose=verbose))


def sampled_outcomes(config: RunConfig, policies: dict[str, Policy], mapping: dict[str, str], instances: int,
                     samples: int, seed: int) -> list[list[bool]]:
    """Per held-out instance, the success of each of `samples` episodes (evaluation sampling settings)."""
    workflow = build_workflow(config)
    sampling = agent_sampling(config.rollout, workflow.agents, "eval")
    outcomes: list[list[bool]] = [[] for _ in range(instances)]
    for sample in range(samples):
        _, episodes = evaluate(workflow, policies, mapping, instances, seed=seed * 1000 + sample, sampling=sampling)
        for i, episode in enumerate(episodes):
            outcomes[i].append(bool(episode.success))
    return outcomes


def base_rates(sampled: RunConfig, greedy: RunConfig, model_path: str, instances: int, k: int, seed: int
               ) -> dict[str, float]:
    """The untrained base on the held-out split of `sampled` (validation): pass@1 and pass@k (k episodes
    per instance, `sampled`'s evaluation temperature) and success under `greedy`'s (temperature 0)."""
    policies, mapping = build_policies(sampled, build_workflow(sampled), model_path)
    outcomes = sampled_outcomes(sampled, policies, mapping, instances, k, seed)
    greedy_success = sampled_outcomes(greedy, policies, mapping, instances, 1, seed)
    return {"pass@1": mean_pass_at_k(outcomes, 1), f"pass@{k}": mean_pass_at_k(outcomes, k),
            "greedy": sum(o[0] for o in greedy_success) / instances, "k": k, "instances": instances,
            "temperature": sampled.rollout.eval_temperature}


def curve(run_dir: Path) -> list[tuple[int, float]]:
    """(step, validation success) of every held-out evaluation a run logged."""
    points = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("eval/success") is not None:
            points.append((int(record["step"]), float(record["eval/success"])))
    return points


def test_policies(config: RunConfig, checkpoint: Path | None, model_path: str
                  ) -> tuple[dict[str, Policy], dict[str, str]]:
    workflow = build_workflow(config)
    if checkpoint is None:
        return build_policies(config, workflow, model_path)
    return policies_from_checkpoint(config, workflow, checkpoint)


class SeedRun:
    """The rows of one seed, from one warm-up; keeps the per-role run for the swapped row."""

    def __init__(self, study: Study, protocol: Protocol, seed: int, out: Path, overrides: list[str],
                 log: Log, verbose: bool = False) -> None:
        self.study, self.protocol, self.seed, self.out, self.overrides, self.log = (
            study, protocol, seed, out, overrides, log)
        self.verbose = verbose
        team = self.config(Row("team", "eval", ""))
        warmed = team.policy.model == "tiny-default"  # as `warm_base` decides: a named model is used as it is
        if warmed:
            log(f"seed {seed}: warm-up seed {protocol.warmup_seed(seed)} (cached after the first time)")
        self.model_path = warm_base(team, protocol.warmup_seed(seed), verbose)
        log(f"seed {seed}: base model {self.model_path}" + ("" if warmed else " (no warm-up)"))
        self.trained: dict[str, Path] = {}
        self.shared: dict[str, Any] = {}  # what several rows of this seed reuse (e.g. the hetero rows' bases)

    def config(self, row: Row, extra: tuple[str, ...] = (), split: str = "validation", name: str = "") -> RunConfig:
        return row_config(self.study, self.protocol, [*row.overrides, *extra], self.seed, self.out,
                          name or f"{row.key}-s{self.seed}", self.overrides, split)

    def test(self, row: Row, extra: tuple[str, ...], checkpoint: Path | None) -> dict[str, Any]:
        test_config = self.config(row, extra, split="test")
        policies, mapping = test_policies(test_config, checkpoint, self.model_path)
        outcomes = sampled_outcomes(test_config, policies, mapping, self.protocol.test_instances,
                                    self.protocol.test_samples, 10_000 + self.seed)
        k = self.protocol.test_samples
        return {"test_success": mean_pass_at_k(outcomes, 1), f"test_pass@{k}": mean_pass_at_k(outcomes, k)}

    def run(self, row: Row) -> dict[str, Any]:
        started = time.time()
        result: dict[str, Any] = {"row": row.key, "label": self.study.label(row), "seed": self.seed,
                                  "warmup_seed": self.protocol.warmup_seed(self.seed)}
        produce = {"eval": self._eval, "train": self._train, "swap": self._swap, "alone": self._alone,
                   "sft": lambda r: sft_row(self, r), "bases": lambda r: hetero_rows.produce(self, r),
                   "transfer": self._transfer, "flows": lambda r: flow_rows.produce(self, r),
                   "scale": lambda r: scale_rows.produce(self, r)}[row.kind]
        result.update(produce(row))
        result["seconds"] = time.time() - started
        self.log(f"seed {self.seed} {result['label']}: test success {result['test_success']:.1%} "
                 f"({result['seconds']:.0f}s)")
        return result

    def _eval(self, row: Row) -> dict[str, Any]:
        sampled = self.config(row)
        greedy = self.config(row, ("rollout.eval_temperature=0.0",))
        rates = base_rates(sampled, greedy, self.model_path, self.protocol.validation_instances,
                           sampled.algorithm.k, self.seed)
        return self.test(row, (), None) | {"base": rates}

    def _train_one(self, row: Row, extra: tuple[str, ...] = (), name: str = "") -> tuple[RunConfig, Path]:
        config = self.config(row, extra, name=name)
        stale = Path(config.output_dir) / config.run_name
        if stale.is_dir():
            # A run of a row that results.json does not hold: the study stopped during it. Keep it, aside.
            stale.rename(stale.with_name(f"{stale.name}.stopped-{int(time.time())}"))
        run_dir = train(config, model_path=self.model_path, progress=self.verbose)
        return config, run_dir

    def _train(self, row: Row, extra: tuple[str, ...] = ()) -> dict[str, Any]:
        _, run_dir = self._train_one(row, extra)
        self.trained[row.key] = run_dir
        summary = json.loads((run_dir / "summary.json").read_text())
        return self.test(row, extra, run_dir / "checkpoints" / "best") | {
            "validation_initial": summary["initial_success"], "validation_best": summary["best_success"],
            "best_step": summary["best_step"], "curve": curve(run_dir), "run_dir": str(run_dir)}

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
        return self.test(row, self.study.transfer, checkpoint) | {"variant": list(self.study.transfer)}


def run_study(study: Study, protocol: Protocol, rows: list[Row], out: Path, overrides: list[str],
              log: Log = print, verbose: bool = False, dry_run: bool = False) -> Path:
    """Every row over every seed; writes OUT/results.json after each row.

    A results.json already in OUT (same study and overrides) is continued: its (row, seed) results are
    kept and not rerun, so a stopped study resumes and a long table can be run a few rows per command.
    Several processes may run other seeds into the same OUT at once (`teamrl study --jobs`): each row's
    result is merged into the file under a lock. dry_run: check the folder and list what remains, run nothing.
    """
    out.mkdir(parents=True, exist_ok=True)
    target = out / "results.json"
    fresh = {"study": study.name, "config": str(study.config), "overrides": overrides,
             "protocol": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(protocol).items()},
             "rows": [], "labels": {}, "results": [], "seconds": 0.0}

    def register(results: dict[str, Any]) -> None:
        _check_same(target, results, study, protocol, overrides)
        wanted = set(results["rows"]) | {row.key for row in rows}
        results["rows"] = [key for key in ROWS if key in wanted]  # table order, whatever order rows ran in
        results["labels"].update({row.key: study.label(row) for row in rows})
        results["protocol"]["seeds"] = sorted(set(results["protocol"]["seeds"]) | set(protocol.seeds))

    if dry_run:  # check and list without writing: the folder may not exist yet
        results = results_file.read(target) or json.loads(json.dumps(fresh))
        register(results)
    else:
        results = results_file.update(target, fresh, register)
    done = {(r["row"], r["seed"]) for r in results["results"]}
    digests = _digests(study, protocol, rows, results, out, overrides)
    cells.check_cells(target, results["results"], digests, log)
    todo_cells = [(row.key, seed) for seed in protocol.seeds for row in rows if (row.key, seed) not in done]
    for line in cells.remaining(todo_cells, results["results"], cells.planned_seconds(study)):
        log(line)
    if dry_run:
        return target
    for seed in protocol.seeds:
        todo = [row for row in rows if (row.key, seed) not in done]
        if not todo:
            continue
        started = time.time()
        seed_run = SeedRun(study, protocol, seed, out, overrides, log, verbose)
        warmup_seconds = time.time() - started  # a cached warm-up costs ~0 s

        def note_warmup(results: dict[str, Any], seed: int = seed, seconds: float = warmup_seconds) -> None:
            spent = results.setdefault("warmup_seconds", {})
            spent[str(seed)] = max(spent.get(str(seed), 0.0), seconds)

        results_file.update(target, fresh, note_warmup)
        seed_run.trained.update({r["row"]: Path(r["run_dir"]) for r in results["results"]
                                 if r["seed"] == seed and r.get("run_dir")})
        for row in todo:
            record = seed_run.run(row) | {"digest": digests[(row.key, seed)]}
            now = results_file.update(target, fresh, lambda results, record=record: results_file.add_record(results, record))
            todo_cells.remove((row.key, seed))
            if todo_cells:  # the ETA again, now with this cell's measured time
                log(cells.remaining(todo_cells, now["results"], cells.planned_seconds(study))[0])
    return target


def _digests(study: Study, protocol: Protocol, rows: list[Row], results: dict[str, Any], out: Path,
             overrides: list[str]) -> dict[tuple[str, int], dict[str, str]]:
    """(row, seed) -> this command's cell digest, for every cell it may run and every finished one."""
    wanted = {(row.key, seed) for row in rows for seed in protocol.seeds}
    wanted |= {(r["row"], r["seed"]) for r in results["results"] if r["row"] in ROWS}
    settings = vars(protocol)
    return {(key, seed): cells.cell_digest(row_config(study, protocol, ROWS[key].overrides, seed, out,
                                                      f"{key}-s{seed}", overrides), settings)
            for key, seed in sorted(wanted)}


def _check_same(target: Path, previous: dict[str, Any], study: Study, protocol: Protocol,
                overrides: list[str]) -> None:
    """Refuse to continue a folder of another study, other overrides or another protocol (seeds aside)."""
    settings = {k: v for k, v in vars(protocol).items() if k != "seeds"}
    earlier = {k: v for k, v in previous.get("protocol", {}).items() if k != "seeds"}
    if previous.get("study") != study.name or previous.get("overrides") != overrides or earlier != settings:
        raise ConfigError(f"{target} holds study {previous.get('study')!r} with overrides {previous.get('overrides')} "
                          f"and protocol {earlier}; continue it with the same study, overrides and protocol "
                          f"(now {study.name!r}, {overrides}, {settings}), or use another --out folder")
