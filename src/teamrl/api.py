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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamrl.config import ConfigError, RunConfig
from teamrl.config.run import config_from_mapping, load_config as _load_file

if TYPE_CHECKING:
    from teamrl.policies.loading import Policy
    from teamrl.rollout.tree import Episode
    from teamrl.workflows.base import Workflow

PACKAGED_CONFIGS = Path(__file__).parent / "configs"


def load_config(source: str | Path | Mapping[str, Any] | RunConfig | None = None,
                overrides: Sequence[str] = (), **settings: Any) -> RunConfig:
    """A validated run configuration.

    source: a YAML file, the name of a packaged config (`"plan_path_team"`, see `teamrl/configs/`), a
    mapping of settings, a RunConfig (copied), or None for the defaults.
    overrides: `key.sub=value` strings, as on the command line.
    settings: top-level keys merged into the source, a section's mapping merged key by key:
    `load_config("plan_path_team", train={"steps": 5}, seed=1)`.
    Raises ConfigError with what is wrong and how to fix it.
    """
    if isinstance(source, RunConfig):
        from teamrl.config import config_to_dict

        source = config_to_dict(source)
    if isinstance(source, Mapping):
        data = copy.deepcopy(dict(source))
    elif source is None:
        data = {}
    else:
        path = Path(source)
        packaged = PACKAGED_CONFIGS / f"{source}.yaml"
        if not path.exists() and path.suffix == "" and packaged.is_file():
            path = packaged
        if not settings:
            return _load_file(path, list(overrides))
        data = _read_mapping(path)
    _merge(data, settings)
    return config_from_mapping(data, list(overrides))


def _read_mapping(path: Path) -> dict[str, Any]:
    """The settings in a YAML file, read and validated as `teamrl train` reads them."""
    from teamrl.config import config_to_dict

    return config_to_dict(_load_file(path, []))


def _merge(data: dict[str, Any], settings: Mapping[str, Any]) -> None:
    """Merge `settings` into `data`: mappings key by key (recursively), other values replaced."""
    for key, value in settings.items():
        if isinstance(value, Mapping) and isinstance(data.get(key), dict):
            _merge(data[key], value)
        else:
            data[key] = copy.deepcopy(value)


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

    @classmethod
    def from_run_dir(cls, run_dir: str | Path) -> TrainResult:
        """The result of a finished run, read from its `summary.json`."""
        run_dir = Path(run_dir)
        summary_file = run_dir / "summary.json"
        if not summary_file.is_file():
            raise ConfigError(f"{run_dir} has no summary.json: the run did not finish (resume it with "
                              f"`teamrl train --resume {run_dir}`)")
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
        return cls(run_dir=run_dir, initial_success=summary["initial_success"],
                   final_success=summary["final_success"], best_success=summary["best_success"],
                   best_step=summary["best_step"], steps=summary["steps"], seconds=summary["train_seconds"],
                   agent_to_policy=dict(summary.get("agent_to_policy", {})))


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


@dataclass(frozen=True)
class EvalResult:
    """Held-out success of a team, and the episodes it was measured on."""

    success: float  # fraction of instances solved
    team_return: float  # mean team reward
    turns: float  # mean turns per episode
    reward_by_agent: dict[str, float]  # mean reward of each agent
    instances: int
    episodes: list[Episode] = field(default_factory=list, repr=False)

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, float], episodes: list[Episode]) -> EvalResult:
        rewards = {key.removeprefix("reward/"): value for key, value in metrics.items() if key.startswith("reward/")}
        return cls(success=metrics["success"], team_return=metrics["team_return"], turns=metrics["turns"],
                   reward_by_agent=rewards, instances=len(episodes), episodes=episodes)


class Team:
    """A loaded team: the workflow, its policies and which agent each policy plays.

    `Team.from_config(config)` loads the untrained base models; `Team.load(run_dir)` a run's trained
    checkpoint (final, else best; or a `checkpoints/<tag>` folder). Nothing here imports the training loop.
    """

    def __init__(self, config: RunConfig, workflow: Workflow, policies: dict[str, Policy],
                 agent_to_policy: dict[str, str]) -> None:
        self.config = config
        self.workflow = workflow
        self.policies = policies
        self.agent_to_policy = agent_to_policy

    @classmethod
    def from_config(cls, config: RunConfig | str | Path | Mapping[str, Any],
                    checkpoint: str | Path | None = None) -> Team:
        """The team of `config` with its base (untrained) policies, or with the policies saved in
        `checkpoint` (a run's `checkpoints/<tag>` folder)."""
        from teamrl.training.build import build_policies, build_workflow, policies_from_checkpoint

        config = config if isinstance(config, RunConfig) else load_config(config)
        workflow = build_workflow(config)
        if checkpoint is not None:
            policies, mapping = policies_from_checkpoint(config, workflow, Path(checkpoint))
        else:
            policies, mapping = build_policies(config, workflow, training=False)
        return cls(config, workflow, policies, mapping)

    @classmethod
    def load(cls, path: str | Path) -> Team:
        """The trained team of a run directory (or of one of its `checkpoints/<tag>` folders)."""
        from teamrl.gateway.serve import locate
        from teamrl.training.build import build_workflow, policies_from_checkpoint

        config, checkpoint = locate(Path(path))
        workflow = build_workflow(config)
        policies, mapping = policies_from_checkpoint(config, workflow, checkpoint)
        return cls(config, workflow, policies, mapping)

    @property
    def agents(self) -> list[str]:
        """The agents' names, in the workflow's order."""
        return [agent.name for agent in self.workflow.agents]

    def evaluate(self, instances: int | None = None, seed: int | None = None) -> EvalResult:
        """Held-out success on the first `instances` held-out instances (default: train.eval_instances),
        sampled with the config's evaluation settings (greedy unless `rollout.eval_temperature` is set)."""
        from teamrl.rollout.agent_params import agent_sampling
        from teamrl.training.evaluate import evaluate

        count = instances if instances is not None else self.config.train.eval_instances
        if count < 1:
            raise ConfigError(f"instances must be at least 1, got {count}")
        sampling = agent_sampling(self.config.rollout, self.workflow.agents, "eval")
        metrics, episodes = evaluate(self.workflow, self.policies, self.agent_to_policy, count,
                                     seed=self.config.seed if seed is None else seed, sampling=sampling)
        return EvalResult.from_metrics(metrics, episodes)

    def ask(self, agent: str, prompt: str | list[dict[str, str]], *, temperature: float | None = None,
            max_new_tokens: int | None = None, seed: int = 0) -> str:
        """One answer of `agent`'s policy to a prompt (text, or chat messages), sampled with the agent's
        evaluation settings unless `temperature` / `max_new_tokens` are given."""
        import dataclasses

        import torch

        from teamrl.rollout.agent_params import agent_sampling
        from teamrl.rollout.engines import sample

        if agent not in self.agent_to_policy:
            raise ConfigError(f"no agent {agent!r} in this team; its agents are {', '.join(self.agents)}")
        params = agent_sampling(self.config.rollout, self.workflow.agents, "eval")[agent]
        changes: dict[str, Any] = {}
        if temperature is not None:
            changes["temperature"] = temperature
        if max_new_tokens is not None:
            changes["max_new_tokens"] = max_new_tokens
        params = dataclasses.replace(params, **changes)
        policy = self.policies[self.agent_to_policy[agent]]
        generator = torch.Generator().manual_seed(seed)
        [[generation]] = sample(policy, [policy.encode_prompt(prompt)], 1, params, generator)
        return generation.text

    def close(self) -> None:
        """Release the engines and the workflow's resources (sandbox workers, a gateway)."""
        from teamrl.rollout.engines import release

        release(self.policies)
        self.workflow.close()

    def __enter__(self) -> Team:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def evaluate(config: RunConfig | str | Path | Mapping[str, Any], instances: int | None = None) -> EvalResult:
    """Held-out success of the untrained team of `config` (a trained one: `Team.load(run_dir).evaluate()`)."""
    with Team.from_config(config) as team:
        return team.evaluate(instances)
