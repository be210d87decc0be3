"""Each agent's sampling settings: the `rollout:` section with its `by_role` entries, as SamplingParams.

    rollout:
      temperature: 1.0
      by_role:
        tool: {max_new_tokens: 64, stop: ["\\n\\n"]}   # a role...
        voter_0: {eval_temperature: 0.7}             # ...or one agent (its entry wins over its role's)

The entries' keys are checked when the config loads (`RolloutConfig`); their names can only be
checked against a workflow's agents, here, when the workflow is built (as the `roles:` mapping is).
"""

from __future__ import annotations

from collections.abc import Sequence

from teamrl.config import ConfigError, RolloutConfig
from teamrl.policies.arithmetic_probe import resolve_sampler_dtype
from teamrl.rollout.builtin_engine import SamplingParams
from teamrl.workflows.base import Agent

MODES = ("train", "eval")


def sampling_params(rollout: RolloutConfig, mode: str) -> SamplingParams:
    """The SamplingParams of one agent's resolved settings, for training or held-out evaluation."""
    if mode == "train":  # sampler_dtype: training samples only, so held-out figures stay comparable across it
        return SamplingParams(
            rollout.temperature,
            rollout.top_p,
            rollout.top_k,
            rollout.max_new_tokens,
            tuple(rollout.stop),
            rollout.memory_gb,
            resolve_sampler_dtype(rollout.sampler_dtype),
        )
    if mode == "eval":
        return SamplingParams(
            rollout.eval_temperature,
            rollout.eval_top_p,
            rollout.eval_top_k,
            rollout.max_new_tokens,
            tuple(rollout.stop),
            rollout.memory_gb,
        )
    raise ValueError(f"mode {mode!r} is unknown; use one of {', '.join(MODES)}")


def check_by_role_names(rollout: RolloutConfig, agents: Sequence[Agent]) -> None:
    """Every `rollout.by_role` key names a role or an agent of the workflow."""
    agent_names = [a.name for a in agents]
    role_names = list(dict.fromkeys(a.role for a in agents))
    unknown = [key for key in rollout.by_role if key not in agent_names and key not in role_names]
    if unknown:
        raise ConfigError(
            f"rollout.by_role: {', '.join(map(repr, unknown))} is neither a role nor an agent of this "
            f"workflow; roles: {', '.join(role_names)}; agents: {', '.join(agent_names)}"
        )


def agent_sampling(rollout: RolloutConfig, agents: Sequence[Agent], mode: str = "train") -> dict[str, SamplingParams]:
    """Agent name -> the SamplingParams it samples with in `mode` (train or eval)."""
    check_by_role_names(rollout, agents)
    return {a.name: sampling_params(rollout.for_agent(a.name, a.role), mode) for a in agents}


def check_context(
    sampling: dict[str, SamplingParams], agent_to_policy: dict[str, str], contexts: dict[str, int | None]
) -> None:
    """Every agent's max_new_tokens fits its policy's model context (positions; None: not known).

    Checked once the models are loaded, before any sampling: a response longer than the model's
    context would cost memory for positions the model was never trained on.
    """
    for agent, params in sampling.items():
        policy = agent_to_policy[agent]
        context = contexts.get(policy)
        if context is not None and params.max_new_tokens >= context:
            raise ConfigError(
                f"rollout.max_new_tokens = {params.max_new_tokens} (agent {agent}) does not fit the "
                f"context of policy {policy}'s model ({context} positions, prompt included); set "
                f"rollout.max_new_tokens (or its by_role entry) below {context}"
            )
