"""Config -> workflow, policies and the role -> policy mapping."""

from __future__ import annotations

from teamrl.config import RunConfig
from teamrl.policies.loading import Policy, load_policy
from teamrl.training.tiny_default import WarmupRecipe, warm_up
from teamrl.workflows.base import Workflow, role_names
from teamrl.workflows.registry import task_entry

TINY_DEFAULT = "tiny-default"


def build_workflow(config: RunConfig) -> Workflow:
    wf = config.workflow
    entry = task_entry(config.task["name"])
    return entry.build(wf.name, config.task_settings(), max_turns=wf.max_turns,
                       prompt_style=wf.prompt_style, format_bonus=wf.format_bonus)


def resolve_model_path(config: RunConfig) -> str:
    """A model path; 'tiny-default' is warmed up (or taken from the cache) for this task."""
    if config.policy.model != TINY_DEFAULT:
        return config.policy.model
    kind = "team" if config.workflow.name == "single" else config.workflow.name
    return str(warm_up(WarmupRecipe.for_task(config.task, config.workflow.max_turns, kind)))


def role_mapping(config: RunConfig, workflow: Workflow) -> dict[str, str]:
    """shared: every role -> 'shared'; per_role: every role -> a policy named after it."""
    roles = role_names(workflow)
    if config.regime == "shared":
        return {role: "shared" for role in roles}
    return {role: role for role in roles}


def build_policies(config: RunConfig, workflow: Workflow, model_path: str | None = None
                   ) -> tuple[dict[str, Policy], dict[str, str]]:
    """Load one policy per distinct name in the role mapping (per_role: one full copy per role)."""
    path = model_path or resolve_model_path(config)
    mapping = role_mapping(config, workflow)
    policies = {
        name: load_policy(name, path, config.policy.dtype, config.policy.device,
                          config.policy.chat_template)
        for name in dict.fromkeys(mapping.values())
    }
    return policies, mapping
