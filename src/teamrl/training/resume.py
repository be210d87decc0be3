"""Exact resume: what a step checkpoint holds beyond the weights, where a resumed run starts, restoring it.

A run resumed from `checkpoints/stepN` continues as if never stopped: the policies' weights,
optimizer and scheduler states, the sampling generator, the loop's and the global Python RNGs, torch's
global RNG, the best-so-far held-out score and the step are restored. The data position needs no
state of its own: step N's batch is instances [N * batch_size, (N + 1) * batch_size) (rollout_step).
metrics.jsonl and alerts.jsonl (`run_files.RUN_LOGS`) are cut back to their length at the checkpoint,
so the resumed run's files equal the uninterrupted one's except for the wall-clock `time/*` values;
no other file of the run directory is opened. A checkpoint that fails its check (a truncated file, a
missing marker) is named with the reason and skipped for the previous good one; when step
checkpoints exist but none is good, resume refuses rather than restart from step 0.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
import yaml

from teamrl.config import ConfigError, RunConfig, config_to_dict, load_config
from teamrl.policies.loading import Policy
from teamrl.policies.storage import load_policy_weights
from teamrl.training.checkpoint import (
    MARKER,
    TRAINER_JSON,
    TRAINER_STATE,
    CheckpointError,
    check_checkpoint_folders,
    damage,
    load_optimizer,
    recover,
    rotate,
    save_optimizer,
    save_torch,
    step_folders,
    step_tag,
    verify,
    write_checkpoint,
)
from teamrl.training.run_files import CONFIG_FILE, RUN_LOGS, SUMMARY_FILE, check_regular_file

# Config keys a resumed run may change; any other difference would make it a different run.
CHANGEABLE = {
    "train.resume",
    "train.steps",
    "train.time_budget_s",
    "train.keep_last",
    "train.checkpoint_every",
    "output_dir",
    "run_name",
    "policy.device",
    "report_to",
}


@dataclass
class LoopState:
    """The loop's own counters at the end of a step."""

    step: int = 0
    initial_success: float = 0.0
    best_success: float = 0.0
    best_step: int = 0
    elapsed_s: float = 0.0
    """Training seconds so far, so time_budget_s counts across restarts."""
    log_bytes: dict[str, int] = field(default_factory=dict)
    """Length of each `*.jsonl` log of the run directory when the checkpoint was written."""


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run continues: its run directory and the checkpoint (None: from step 0)."""

    run_path: Path
    checkpoint: Path | None
    loop: LoopState | None

    @property
    def step(self) -> int:
        return self.loop.step if self.loop else 0

    @property
    def log_bytes(self) -> dict[str, int]:
        return self.loop.log_bytes if self.loop else {}


class CheckpointedRun(Protocol):
    """What a step checkpoint needs of the run directory (`run_dir.RunDirectory`)."""

    @property
    def checkpoints(self) -> Path: ...

    def sync_logs(self) -> dict[str, int]: ...


class TrackerStates:
    """The update backend's per-role gradient trackers (their EMAs) as a checkpoint component.

    The checkpoint is read before the backend exists (its workers copy the restored weights), so a
    restored state waits here until `attach` hands it to the backend.
    """

    def __init__(self) -> None:
        self.backend: Any = None
        self.restored: dict[str, Any] | None = None

    def attach(self, backend: Any) -> None:
        self.backend = backend
        if self.restored is not None:
            backend.load_tracker_states(self.restored)

    def state_dict(self) -> dict[str, Any]:
        return self.backend.tracker_states()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.restored = state


def save_training_state(
    run: CheckpointedRun,
    loop: LoopState,
    policies: dict[str, Policy],
    optimizers: dict[str, Any],
    generator: torch.Generator,
    rng: random.Random,
    keep_last: int,
    components: dict[str, Any] | None = None,
) -> Path:
    """Write the resumable checkpoint `step<loop.step>` atomically, then rotate old step checkpoints.

    components: further stateful parts of the loop (e.g. diagnostics with running baselines), each
    with state_dict() / load_state_dict(); their states may hold tensors, numbers, strings, None and
    lists, tuples and dicts of those (torch.load(weights_only=True) reads them back).
    """
    loop.log_bytes = run.sync_logs()  # durable before the checkpoint that points into them

    def extra(folder: Path) -> None:
        for name, state in optimizers.items():
            save_optimizer(state, folder / name)
        parts = {name: part.state_dict() for name, part in (components or {}).items()}
        save_torch(
            {"loop": asdict(loop), "rng": capture_rng(generator, rng), "components": parts}, folder / TRAINER_STATE
        )
        (folder / TRAINER_JSON).write_text(json.dumps(asdict(loop), indent=1))

    path = write_checkpoint(run.checkpoints, step_tag(loop.step), policies, extra)
    rotate(run.checkpoints, keep_last)
    return path


def capture_rng(generator: torch.Generator, rng: random.Random) -> dict[str, Any]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return {
        "loop": rng.getstate(),
        "python": random.getstate(),
        "torch": torch.get_rng_state(),
        "generator": generator.get_state(),
        "cuda": cuda,
    }


def restore_rng(states: dict[str, Any], generator: torch.Generator, rng: random.Random) -> None:
    rng.setstate(states["loop"])
    random.setstate(states["python"])
    torch.set_rng_state(states["torch"])
    generator.set_state(states["generator"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def find_resume_point(config: RunConfig) -> ResumePoint | None:
    """Resolve `train.resume` ('' | 'auto' | a run directory or checkpoint folder); None: a fresh run.

    'auto' resumes `output_dir/run_name` when it holds a run and starts fresh otherwise. A run
    directory resumes from its newest complete, verified step checkpoint (or from step 0 when it
    has none); a checkpoint folder resumes from exactly that checkpoint.
    """
    wanted = config.train.resume
    if not wanted:
        return None
    if wanted == "auto":
        if not config.run_name:
            raise ConfigError(
                "train.resume = 'auto' needs a fixed run_name (the default name has a "
                "timestamp, so a restarted run could not find its directory)"
            )
        target = Path(config.output_dir) / config.run_name
        if not (target / "metrics.jsonl").exists():
            return None
    else:
        target = Path(wanted).expanduser()
        if not target.is_dir():
            raise ConfigError(
                f"train.resume = {wanted!r}: no such folder; give a run directory "
                "or one of its checkpoints/stepN folders"
            )
    run_path, checkpoint = _locate(target)
    check_run_files(run_path)  # before anything is changed: a refused resume leaves the run as it was
    recover(run_path / "checkpoints")
    _check_same_run(config, run_path)
    if checkpoint is None:
        checkpoint = _newest_valid(run_path / "checkpoints")
    else:
        verify(checkpoint)
    if checkpoint is None:
        print(f"teamrl: {run_path} has no complete step checkpoint; restarting it from step 0", file=sys.stderr)
        return ResumePoint(run_path, None, None)
    loop = LoopState(**json.loads((checkpoint / TRAINER_JSON).read_text()))
    return ResumePoint(run_path, checkpoint, loop)


def restore_training_state(
    point: ResumePoint | None,
    policies: dict[str, Policy],
    optimizers: dict[str, Any],
    generator: torch.Generator,
    rng: random.Random,
    components: dict[str, Any] | None = None,
) -> LoopState | None:
    """Load the checkpoint of `point` into the freshly built policies, optimizers and RNGs.

    Call it after the optimizers (and any frozen KL reference) are built from the initial weights.
    Returns the loop counters to continue from, or None for a run that starts at step 0.
    """
    if point is None or point.checkpoint is None:
        return None
    folder = point.checkpoint
    saved = {p.name for p in folder.iterdir() if (p / "config.json").exists() or (p / "adapter_config.json").exists()}
    if saved != set(policies):
        raise CheckpointError(
            f"{folder} holds policies {sorted(saved)} but this run has {sorted(policies)}; "
            "resume with the regime and roles of the original run"
        )
    for name, policy in policies.items():
        try:
            load_policy_weights(policy, folder / name)
            load_optimizer(optimizers[name], folder / name)
        except (ValueError, FileNotFoundError, KeyError) as err:
            raise CheckpointError(f"cannot restore policy {name!r} from {folder}: {err}") from err
    state = torch.load(folder / TRAINER_STATE, weights_only=True)
    restore_rng(state["rng"], generator, rng)
    for name, part in (components or {}).items():
        if name not in state["components"] and getattr(part, "restorable_without_state", False):
            part.load_state_dict(None)  # e.g. the run's fingerprint: the checkpoint predates it
            continue
        if name not in state["components"]:
            raise CheckpointError(f"{folder} has no saved state for {name!r}; it was written by a run without it")
        part.load_state_dict(state["components"][name])
    return LoopState(**state["loop"])


def _locate(target: Path) -> tuple[Path, Path | None]:
    """(run directory, checkpoint or None) for a folder given to --resume."""
    if (target / "metrics.jsonl").exists() and (target / "config.yaml").exists():
        return target, None
    if target.parent.name == "checkpoints" and (target / MARKER).exists():
        if not (target / TRAINER_STATE).exists():
            raise ConfigError(
                f"{target} holds weights only (best and final checkpoints do); resume from "
                "a checkpoints/stepN folder or from the run directory"
            )
        return target.parent.parent, target
    raise ConfigError(
        f"{target} is neither a run directory (with metrics.jsonl and config.yaml) nor a "
        "complete checkpoints/stepN folder"
    )


def check_run_files(run_path: Path) -> None:
    """RunFileError when a file or folder a resume writes (config, logs, summary, checkpoints) is a
    symbolic link or a special file: a resume never writes through one."""
    for name in (CONFIG_FILE, *RUN_LOGS, SUMMARY_FILE):
        check_regular_file(run_path / name, f"run file {name}")
    check_checkpoint_folders(run_path / "checkpoints")


def _newest_valid(root: Path) -> Path | None:
    """The newest step checkpoint that passes verification; each damaged newer one is named with the
    reason and skipped. None when there is no step folder; CheckpointError when none of them is good."""
    skipped = []
    for _, path in reversed(step_folders(root)):
        reason = damage(path)
        if reason is None:
            return path
        print(f"teamrl: skipping checkpoint {path}: {reason}; looking for an earlier one", file=sys.stderr)
        skipped.append(path.name)
    if skipped:
        raise CheckpointError(
            f"no usable step checkpoint in {root} ({', '.join(reversed(skipped))} failed the "
            "check above); restore them, or delete them to restart the run from step 0"
        )
    return None


def _check_same_run(config: RunConfig, run_path: Path) -> None:
    try:  # a key added to teamrl after the run was written takes its default, as the run did
        saved = _flatten(config_to_dict(load_config(run_path / CONFIG_FILE)))
    except ConfigError:  # (check_run_files made sure it is a regular file: reading it cannot block)
        saved = _flatten(yaml.safe_load((run_path / CONFIG_FILE).read_text()) or {})
    current = _flatten(config_to_dict(config))
    differ = sorted(k for k in set(saved) | set(current) if k not in CHANGEABLE and saved.get(k) != current.get(k))
    if differ:
        shown = ", ".join(f"{k}: {saved.get(k)!r} -> {current.get(k)!r}" for k in differ[:6])
        raise ConfigError(
            f"cannot resume {run_path} with a different config ({shown}); resume with the "
            f"run's own {run_path / 'config.yaml'} (only {', '.join(sorted(CHANGEABLE))} may change)"
        )


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key != "task":
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out
