"""A loaded team: a workflow, its policies and which agent each plays, from a config or a run directory.

`Team.from_config(config)` loads the base policies, `Team.load(run_dir)` a run's trained checkpoint; a team
evaluates on held-out instances and answers as any of its agents. Nothing here imports the training loop:
serving, evaluating and replaying a team go through this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamrl.config import ConfigError, RunConfig, load_config
from teamrl.config.sources import load_config_from

if TYPE_CHECKING:
    from teamrl.policies.loading import Policy
    from teamrl.rollout.tree import Episode
    from teamrl.workflows.base import Workflow


def check_results_folder(folder: str | Path) -> Path:
    """`folder` as a Path when it is new or an empty folder; else ConfigError (nothing is written over)."""
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(
            f"{folder} exists and is not an empty folder; give a new folder for the results "
            "(teamrl does not write over files it did not make)"
        )
    return folder


def locate(path: Path) -> tuple[RunConfig, Path]:
    """(the run's config, the checkpoint to serve) for a run directory or one of its checkpoints/<tag>."""
    path = path.expanduser().resolve()
    if (path / "config.yaml").is_file() and (path / "checkpoints").is_dir():
        run, checkpoint = path, None
        for tag in ("final", "best"):
            if (path / "checkpoints" / tag).is_dir():
                checkpoint = path / "checkpoints" / tag
                break
        if checkpoint is None:
            raise ConfigError(f"{path} holds no final or best checkpoint yet; give checkpoints/<tag>")
    elif path.parent.name == "checkpoints" and (path.parent.parent / "config.yaml").is_file():
        run, checkpoint = path.parent.parent, path
    else:
        raise ConfigError(
            f"{path} is neither a run directory (config.yaml, checkpoints/) nor one of its checkpoints/<tag> folders"
        )
    return load_config(run / "config.yaml"), checkpoint


@dataclass(frozen=True)
class EvalResult:
    """Held-out success of a team, and the episodes it was measured on."""

    success: float  # fraction of instances solved
    team_return: float  # mean team reward
    turns: float  # mean turns per episode
    reward_by_agent: dict[str, float]  # mean reward of each agent
    instances: int
    episodes: list[Episode] = field(default_factory=list, repr=False)

    def write(self, folder: str | Path) -> Path:
        """Write `eval.json` (the aggregate metrics) and `episodes.jsonl` (one line per instance: its index,
        success, team return, per-agent rewards and transcript) into `folder`, a new or empty folder."""
        import json

        folder = check_results_folder(folder)
        folder.mkdir(parents=True, exist_ok=True)
        summary = {
            "success": self.success,
            "team_return": self.team_return,
            "turns": self.turns,
            "reward_by_agent": self.reward_by_agent,
            "instances": self.instances,
        }
        (folder / "eval.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        with open(folder / "episodes.jsonl", "w", encoding="utf-8") as handle:
            for episode in self.episodes:
                row = {
                    "instance": episode.instance,
                    "success": bool(episode.success),
                    "team_return": episode.team_return,
                    "turns": episode.turns,
                    "rewards_by_agent": episode.rewards_by_agent,
                    "transcript": episode.transcript,
                }
                handle.write(json.dumps(row, default=str) + "\n")
        return folder

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, float], episodes: list[Episode]) -> EvalResult:
        rewards = {key.removeprefix("reward/"): value for key, value in metrics.items() if key.startswith("reward/")}
        return cls(
            success=metrics["success"],
            team_return=metrics["team_return"],
            turns=metrics["turns"],
            reward_by_agent=rewards,
            instances=len(episodes),
            episodes=episodes,
        )


class Team:
    """A loaded team: the workflow, its policies and which agent each policy plays.

    `Team.from_config(config)` loads the untrained base models; `Team.load(run_dir)` a run's trained
    checkpoint (final, else best; or a `checkpoints/<tag>` folder). Nothing here imports the training loop.
    """

    def __init__(
        self, config: RunConfig, workflow: Workflow, policies: dict[str, Policy], agent_to_policy: dict[str, str]
    ) -> None:
        self.config = config
        self.workflow = workflow
        self.policies = policies
        self.agent_to_policy = agent_to_policy

    @classmethod
    def from_config(
        cls, config: RunConfig | str | Path | Mapping[str, Any], checkpoint: str | Path | None = None
    ) -> Team:
        """The team of `config` with its base (untrained) policies, or with the policies saved in
        `checkpoint` (a run's `checkpoints/<tag>` folder)."""
        from teamrl.setup.team import build_policies, build_workflow, policies_from_checkpoint

        config = config if isinstance(config, RunConfig) else load_config_from(config)
        workflow = build_workflow(config)
        if checkpoint is not None:
            policies, mapping = policies_from_checkpoint(config, workflow, Path(checkpoint))
        else:
            policies, mapping = build_policies(config, workflow, training=False)
        return cls(config, workflow, policies, mapping)

    @classmethod
    def load(cls, path: str | Path) -> Team:
        """The trained team of a run directory (or of one of its `checkpoints/<tag>` folders)."""
        from teamrl.setup.team import build_workflow, policies_from_checkpoint

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
        from teamrl.rollout.evaluation import evaluate

        count = instances if instances is not None else self.config.train.eval_instances
        if count < 1:
            raise ConfigError(f"instances must be at least 1, got {count}")
        sampling = agent_sampling(self.config.rollout, self.workflow.agents, "eval")
        metrics, episodes = evaluate(
            self.workflow,
            self.policies,
            self.agent_to_policy,
            count,
            seed=self.config.seed if seed is None else seed,
            sampling=sampling,
        )
        return EvalResult.from_metrics(metrics, episodes)

    def ask(
        self,
        agent: str,
        prompt: str | list[dict[str, str]],
        *,
        temperature: float | None = None,
        max_new_tokens: int | None = None,
        seed: int = 0,
    ) -> str:
        """One answer of `agent`'s policy to a prompt (text, or chat messages), sampled with the agent's
        evaluation settings unless `temperature` / `max_new_tokens` are given."""
        import dataclasses

        import torch

        from teamrl.rollout.agent_params import agent_sampling
        from teamrl.rollout.engine_routing import sample

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
        from teamrl.rollout.sampler import release

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
