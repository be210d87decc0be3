"""RunDiagnostics: config checks, which policies are watched for dominance, per-agent policies."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from teamrl.config import ConfigError, load_config
from teamrl.diagnostics.session import RunDiagnostics, merge_duplicates
from teamrl.workflows.base import Agent

VOTING = [Agent("generator_0", "generator"), Agent("generator_1", "generator"), Agent("aggregator", "aggregator")]


def test_unknown_role_in_the_kl_anchor_names_the_real_roles():
    config = load_config(None, ["algorithm.kl_coef_by_role={voter: 0.1}"])
    with pytest.raises(ConfigError, match="unknown role.*voter.*aggregator, generator"):
        RunDiagnostics(config, VOTING, {a.name: "shared" for a in VOTING})


def test_reference_needed_only_for_a_positive_kl_somewhere():
    agents = {a.name: "shared" for a in VOTING}
    assert not RunDiagnostics(load_config(None), VOTING, agents).needs_reference
    anchored = load_config(None, ["algorithm.kl_coef_by_role={aggregator: 0.05}"])
    assert RunDiagnostics(anchored, VOTING, agents).needs_reference


def test_tracker_only_when_diagnostics_or_damping_need_it():
    agents = {a.name: "shared" for a in VOTING}
    assert RunDiagnostics(load_config(None, ["diagnostics.level=none"]), VOTING, agents).tracker_factory() is None
    damped = load_config(None, ["diagnostics.level=none", "algorithm.coherence_damping=0.2"])
    factory = RunDiagnostics(damped, VOTING, agents).tracker_factory()
    assert factory is not None and factory.damping == 0.2 and not factory.full
    # Each policy's tracker knows the roles it serves (their shares are written on every step).
    state = SimpleNamespace(optimizer=SimpleNamespace(param_groups=[{"params": []}]))
    assert factory("shared", state).roles == ("generator", "aggregator")
    per_role = RunDiagnostics(load_config(None), VOTING, {a.name: a.role for a in VOTING}).tracker_factory()
    assert per_role is not None and per_role("generator", state).roles == ("generator",)


def test_dominance_is_watched_only_in_policies_serving_several_roles():
    config = load_config(None)
    shared = RunDiagnostics(config, VOTING, {a.name: "shared" for a in VOTING})
    assert shared.monitor.shared == {"shared": ["generator", "aggregator"]}
    per_agent = RunDiagnostics(config, VOTING, {a.name: a.name for a in VOTING})  # regime: per_agent
    assert per_agent.monitor.shared == {}


def test_a_role_split_over_per_agent_policies_reports_the_mean():
    merged = merge_duplicates([{"diag/role/generator/grad_norm": 1.0, "diag/agent/generator_0/grad_norm": 1.0},
                               {"diag/role/generator/grad_norm": 3.0, "diag/agent/generator_1/grad_norm": 3.0}])
    assert merged == {"diag/role/generator/grad_norm": 2.0, "diag/agent/generator_0/grad_norm": 1.0,
                      "diag/agent/generator_1/grad_norm": 3.0}
