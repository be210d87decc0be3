"""The Python API: load a config, train it, evaluate a team, load a trained team and ask its agents.

    import teamrl

    config = teamrl.load_config("plan_path_team.yaml", train={"steps": 20})
    result = teamrl.train(config)                 # a TrainResult: run_dir, success before / after
    team = teamrl.Team.load(result.run_dir)       # the trained policies, one per agent as trained
    print(team.evaluate(instances=50).success)    # held-out success, the run's eval sampling
    print(team.ask(team.agents[0], "Hello"))      # one answer from that agent's policy

The command line (`teamrl train`, `teamrl eval`, ...) is a thin layer over these functions. Heavy
modules (torch, transformers) are imported when a function runs, not when `teamrl` is imported.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrl.config import ConfigError, RunConfig
from teamrl.config.sources import load_config_from as load_config
from teamrl.setup.loaded_team import EvalResult, Team, evaluate

__all__ = ["EvalResult", "Team", "TrainResult", "evaluate", "load_config", "train"]


@dataclass(frozen=True)
class TrainResult:
    """What a finished run reports (its run directory's `summary.json`)."""

    run_dir: Path
    initial_success: float  # held-out success before training
    final_success: float  # after the last step
    best_success: float  # the best held-out evaluation (the `best` checkpoint)
    best_step: int  # 0: training never beat the initial model
    steps: int
    seconds: float  # training wall time
    agent_to_policy: dict[str, str] = field(default_factory=dict)
    # Digests of each step's sampled tokens and log-probs and of the final weights: equal for the same run
    # bit for bit (`teamrl.training.fingerprint.first_difference` says where two runs part); None: an older run.
    fingerprint: dict[str, Any] | None = None

    @classmethod
    def from_run_dir(cls, run_dir: str | Path) -> TrainResult:
        """The result of a finished run, read from its `summary.json`."""
        run_dir = Path(run_dir)
        summary_file = run_dir / "summary.json"
        if not summary_file.is_file():
            raise ConfigError(
                f"{run_dir} has no summary.json: the run did not finish (resume it with "
                f"`teamrl train --resume {run_dir}`)"
            )
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
        return cls(
            run_dir=run_dir,
            initial_success=summary["initial_success"],
            final_success=summary["final_success"],
            best_success=summary["best_success"],
            best_step=summary["best_step"],
            steps=summary["steps"],
            seconds=summary["train_seconds"],
            agent_to_policy=dict(summary.get("agent_to_policy", {})),
            fingerprint=summary.get("fingerprint"),
        )


def train(config: RunConfig | str | Path | Mapping[str, Any], *, resume: str | Path | None = None) -> TrainResult:
    """Train the team `config` describes (a RunConfig, a YAML file or a mapping of settings).

    resume: a run directory to continue from its last checkpoint (exactly as if never interrupted).
    Writes a run directory (resolved config, metrics.jsonl, transcripts, checkpoints, summary.json).
    """
    from teamrl.training.loop import train as train_loop

    config = config if isinstance(config, RunConfig) else load_config(config)
    if resume is not None:
        config = copy.deepcopy(config)
        config.train.resume = str(resume)
    return TrainResult.from_run_dir(train_loop(config))
