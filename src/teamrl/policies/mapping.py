"""Which policy serves which agent: the `regime` presets and the `roles:` mapping, validated.

The result is always agent name -> policy name. Duplicated agents of one role (voter_0..2) are
distinct agents: `per_agent` gives each its own policy, and `roles:` may name them one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from teamrl.config import REGIMES, ConfigError
from teamrl.config.options import Regime
from teamrl.workflows.base import Agent


def preset_mapping(regime: Regime, agents: Iterable[Agent]) -> dict[str, str]:
    """shared: every agent -> 'shared'; per_role: -> its role; per_agent: -> its own name."""
    if regime not in REGIMES:
        raise ConfigError(f"regime = {regime!r} is invalid: expected {' or '.join(REGIMES)}")
    pick = {"shared": lambda a: "shared", "per_role": lambda a: a.role, "per_agent": lambda a: a.name}[regime]
    return {agent.name: pick(agent) for agent in agents}


def agent_policy_mapping(
    regime: Regime,
    roles: Mapping[str, str],
    defined: Iterable[str],
    agents: list[Agent],
) -> dict[str, str]:
    """Agent name -> policy name for a workflow's `agents`.

    roles: the config's `roles:` section (role or agent name -> policy); empty means the `regime`
    preset. defined: the names under `policies:` (each must end up serving at least one agent).
    """
    defined = list(defined)
    agent_names = [a.name for a in agents]
    role_names = list(dict.fromkeys(a.role for a in agents))
    if not roles:
        mapping = preset_mapping(regime, agents)
        produced = list(dict.fromkeys(mapping.values()))
        extra = [name for name in defined if name not in produced]
        if extra:
            raise ConfigError(
                f"policies {', '.join(extra)} serve no agent: regime {regime!r} creates the policies "
                f"{', '.join(produced)}. Rename them, pick another regime, or add a `roles:` mapping "
                f"(roles: {{{role_names[0]}: {extra[0]}}})."
            )
        return mapping
    known = set(agent_names) | set(role_names)
    unknown = [key for key in roles if key not in known]
    if unknown:
        raise ConfigError(
            f"roles: {', '.join(map(repr, unknown))} is neither a role nor an agent of this workflow; "
            f"roles: {', '.join(role_names)}; agents: {', '.join(agent_names)}"
        )
    mapping = {}
    for agent in agents:
        policy = roles.get(agent.name, roles.get(agent.role))
        if policy is None:
            raise ConfigError(
                f"agent {agent.name!r} (role {agent.role!r}) has no policy: add `roles.{agent.role}: "
                f"<policy>` (or `roles.{agent.name}` for this agent alone)"
            )
        mapping[agent.name] = policy
    used = set(mapping.values())
    unused = [name for name in defined if name not in used]
    if unused:
        raise ConfigError(
            f"policies {', '.join(unused)} serve no agent; map a role to each under `roles:` or delete it"
        )
    shadowed = [
        key
        for key in roles
        if key in role_names and key not in agent_names and all(a.name in roles for a in agents if a.role == key)
    ]
    if shadowed:
        raise ConfigError(
            f"roles.{shadowed[0]} is never used: every agent of that role has its own entry under `roles:`; delete it"
        )
    return mapping
