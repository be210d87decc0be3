"""The whole run's configuration, and loading it from YAML plus `key.sub=value` overrides."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from teamrl.config.building import build_dataclass, check_values, set_dotted
from teamrl.config.checks import ConfigError, require
from teamrl.config.cross_checks import check_pipeline, check_rollout_workers_engine, check_sharding
from teamrl.config.options import Regime, check_choice, choices
from teamrl.config.sections import (
    AlgorithmConfig,
    DiagnosticsConfig,
    PolicyConfig,
    RolloutConfig,
    TrainConfig,
    TrainerConfig,
    WorkflowConfig,
)

REGIMES = choices(Regime)


@dataclass
class RunConfig:
    """A whole run. `teamrl train CONFIG.yaml key.sub=value ...`"""

    seed: int = 0
    """Seeds torch, Python's random and the data order."""
    output_dir: str = "runs"
    """Parent folder of run directories."""
    run_name: str = ""
    """Run directory name (default: workflow-regime-seed-time)."""
    regime: Regime = "shared"
    """Preset used when `roles` is empty: shared (one policy 'shared' for every agent), per_role (a
    policy per role, named after it) or per_agent (a policy per agent, named after it)."""
    task: dict = field(default_factory=lambda: {"name": "plan_path"})
    """The task: `name` (plan_path, sokoban, sudoku, ...) plus that task's own settings."""
    workflow: WorkflowConfig = field(default_factory=WorkflowConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    policies: dict = field(default_factory=dict)
    """Named policies: name -> fields of `policy` to override (model, lr, lora, ...); the rest is inherited."""
    roles: dict = field(default_factory=dict)
    """Role or agent name -> policy name; an agent's own entry wins over its role's. Empty: the `regime` preset."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    diagnostics: DiagnosticsConfig = field(default_factory=DiagnosticsConfig)
    report_to: list | str = "auto"
    """Experiment trackers that get every metric and the config, besides metrics.jsonl: a list of
    tensorboard, wandb, mlflow, trackio (each writes offline, to local files; docs/howto/trackers.md);
    auto: tensorboard when installed; all: every installed one; none."""
    project: str = "teamrl"
    """Tracker project: the W&B and trackio project, the MLflow experiment."""

    def __post_init__(self) -> None:
        # Each section checked its own fields when it was built; here: the top level's and those across sections.
        check_choice(self.regime, "regime", Regime, " or ".join(REGIMES))
        self._check_policies()
        try:
            self.task_settings()
        except (KeyError, ValueError, TypeError) as err:
            raise ConfigError(f"task: {str(err).strip(chr(34))}") from err
        from teamrl.config.tasks import task_entry

        entry = task_entry(self.task["name"])
        kinds = ("team", *(("single",) if entry.single else ()), *sorted(entry.workflows))
        require(
            self.workflow.name in kinds,
            "workflow.name",
            self.workflow.name,
            f"one of {', '.join(kinds)} for task {self.task['name']!r}",
        )
        check_rollout_workers_engine(self.rollout, self.trainer)
        check_sharding(self.trainer, self.algorithm)
        check_pipeline(self.trainer, self.algorithm)
        from teamrl.config.report_to import resolve_report_to

        resolve_report_to(self.report_to)  # unknown names and missing packages fail here, not mid-run
        require(bool(self.project) and isinstance(self.project, str), "project", self.project, "a non-empty name")

    def _check_policies(self) -> None:
        """Named policies build into valid PolicyConfigs; `roles` maps names to names."""
        for name, entry in self.policies.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ConfigError(f"policies: policy name {name!r} must be an identifier (letters, digits, _)")
            if entry is not None and not isinstance(entry, dict):
                raise ConfigError(f"policies.{name} must be a mapping of policy fields, got {entry!r}")
            self.policy_config(name)
        for key, value in self.roles.items():
            if not isinstance(value, str) or not value.isidentifier():
                raise ConfigError(f"roles.{key} = {value!r} must be a policy name (an identifier)")
            if self.policies and value not in self.policies:
                raise ConfigError(
                    f"roles.{key} = {value!r} is not defined under `policies` "
                    f"(defined: {', '.join(sorted(self.policies))}); add policies.{value} "
                    "or map to a defined policy"
                )

    def policy_config(self, name: str) -> PolicyConfig:
        """The settings of policy `name`: `policy` overridden by `policies[name]` (when present)."""
        base = dataclasses.asdict(self.policy)
        entry = dict(self.policies.get(name) or {})
        if isinstance(entry.get("lora"), dict) and isinstance(base.get("lora"), dict):
            entry["lora"] = {**base["lora"], **entry["lora"]}  # a policy may change only the rank
        return build_dataclass(
            PolicyConfig, {**base, **entry}, f"policies.{name}." if name in self.policies else "policy."
        )

    def task_settings(self) -> Any:
        """The task section as the task's typed, validated settings object."""
        from teamrl.config.tasks import task_settings

        return task_settings(self.task)


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> RunConfig:
    """Read a YAML file (or start from defaults) and apply `key.sub=value` overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            if path.exists():  # a FIFO, device or folder: reading it would block or fail
                kind = "a folder" if path.is_dir() else "not a regular file (a FIFO, socket or device)"
                raise ConfigError(f"config file {path} is {kind}; pass a YAML file")
            raise ConfigError(f"config file {path} does not exist")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ConfigError(
                f"config file {path} is not a text file (byte {err.object[err.start]:#04x} at offset "
                f"{err.start} is not UTF-8); pass a YAML config file"
            ) from None
        data = _parse_yaml(text, f"config file {path}", "fix the file")
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(
                f"config file {path} holds a YAML {type(data).__name__}, not a mapping of "
                "settings; write one `key: value` per line, e.g. `seed: 1` or `train: {steps: 50}`"
            )
    return config_from_mapping(data, overrides)


def config_from_mapping(data: dict[str, Any], overrides: Sequence[str] = ()) -> RunConfig:
    """A validated RunConfig from a mapping of settings (as a YAML file holds them) and `key.sub=value`
    overrides; `data` is changed in place by the overrides."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key.sub=value")
        key, raw = item.split("=", 1)
        value = _parse_yaml(raw, f"override {key.strip()}", f"fix it, or quote a plain string: {key.strip()}='...'")
        set_dotted(data, key.strip(), value if raw else "")
    check_values(data)
    return build_dataclass(RunConfig, data, "")


def _parse_yaml(text: str, what: str, fix: str) -> Any:
    """`text` as YAML; ConfigError naming `what` (and `fix`) when it is not valid YAML or nests too deep."""
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = err.problem or err.context or type(err).__name__
        raise ConfigError(f"{what} is not valid YAML: {problem}{where}; {fix}") from None
    except yaml.YAMLError as err:  # e.g. a control character: the reader's message names it
        raise ConfigError(f"{what} is not valid YAML: {str(err).splitlines()[0]}; {fix}") from None
    except RecursionError:  # the parser recurses once per bracket
        raise ConfigError(
            f"{what} nests brackets too deeply to read, and no setting nests more than a few levels; check its brackets"
        ) from None
    except ValueError as err:  # an integer of thousands of digits: Python's int() refuses to read it
        raise ConfigError(f"{what}: {err}; {fix}") from None


def config_to_dict(config: RunConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)
