"""The training loop's one handle on diagnostics: trackers for the update, step metrics, alerts.

The loop asks it for a tracker factory (handed to the update backend), passes it each step's
samples and the trackers' results, and gets back the metrics to log and the alerts to print.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from teamrl.config import ConfigError, DiagnosticsConfig, RunConfig
from teamrl.diagnostics.alerts import Alert, AlertMonitor
from teamrl.diagnostics.drift import Baselines
from teamrl.diagnostics.gradients import RoleGradients
from teamrl.diagnostics.rollout import rollout_diagnostics
from teamrl.rollout.tree import Sample
from teamrl.workflows.base import Agent


@dataclass(frozen=True)
class TrackerFactory:
    """(policy name, PolicyOptimizer) -> a RoleGradients over what that optimizer trains.

    A plain picklable object (not a closure) so the Ray backend can ship it to its actors.
    """

    full: bool
    damping: float
    tau: float
    sketch_dim: int
    exact_max_params: int
    seed: int
    policy_roles: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(policy name, the roles it serves): a policy's shares are written for each of its roles."""

    def __call__(self, name: str, state) -> RoleGradients:
        params = [p for group in state.optimizer.param_groups for p in group["params"]]
        return RoleGradients(
            params,
            full=self.full,
            damping=self.damping,
            tau=self.tau,
            sketch_dim=self.sketch_dim,
            exact_max_params=self.exact_max_params,
            seed=self.seed,
            roles=dict(self.policy_roles).get(name, ()),
        )


class RunDiagnostics:
    """Diagnostics of one run: configured once, fed every step."""

    def __init__(self, config: RunConfig, agents: list[Agent], agent_policy: dict[str, str]) -> None:
        self.config: DiagnosticsConfig = config.diagnostics
        self.algo = config.algorithm
        self.on = self.config.level != "none"
        roles = {a.role for a in agents}
        unknown = sorted(set(self.algo.kl_coef_by_role) - roles)
        if unknown:
            raise ConfigError(
                f"algorithm.kl_coef_by_role names unknown role(s) {', '.join(unknown)}; "
                f"the roles of this workflow are {', '.join(sorted(roles))}"
            )
        policy_roles: dict[str, list[str]] = {}
        for a in agents:
            mine = policy_roles.setdefault(agent_policy[a.name], [])
            if a.role not in mine:
                mine.append(a.role)
        self.policy_roles = policy_roles
        self.monitor = AlertMonitor(self.config, policy_roles) if self.on and self.config.alerts else None
        self.baselines = Baselines(self.config.baseline_steps)
        self.seed = config.seed

    @property
    def needs_reference(self) -> bool:
        """Whether the optimizers must keep a reference model (a KL anchor somewhere)."""
        return self.algo.kl_coef > 0 or any(c > 0 for c in self.algo.kl_coef_by_role.values())

    def tracker_factory(self) -> TrackerFactory | None:
        """None when neither diagnostics nor coherence damping need per-role gradients."""
        if not self.on and self.algo.coherence_damping == 0:
            return None
        return TrackerFactory(
            self.config.level == "full",
            self.algo.coherence_damping,
            self.algo.coherence_tau,
            self.config.sketch_dim,
            self.config.exact_max_params,
            self.seed,
            tuple((policy, tuple(roles)) for policy, roles in self.policy_roles.items()),
        )

    def step_metrics(self, samples: list[Sample], update_diagnostics: list[dict[str, float]]) -> dict[str, float]:
        """Rollout statistics, the trackers' per-role metrics and drift against the baseline."""
        if not self.on:
            return merge_duplicates(update_diagnostics)
        metrics = rollout_diagnostics(samples, with_diversity=self.config.level == "full")
        metrics.update(merge_duplicates(update_diagnostics))
        self.baselines.observe(metrics)
        metrics.update(self.baselines.drift(metrics))
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """What carries over from step to step (drift baselines, the alert monitor), for exact resume."""
        return {
            "baselines": self.baselines.state_dict(),
            "monitor": self.monitor.state_dict() if self.monitor is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.baselines.load_state_dict(state["baselines"])
        if self.monitor is not None:
            self.monitor.load_state_dict(state["monitor"])

    def alerts(self, step: int, metrics: dict[str, float]) -> list[Alert]:
        """Alerts that fire at this step (give held-out steps their `eval/success`)."""
        return self.monitor.observe(step, metrics) if self.monitor is not None else []


def merge_duplicates(parts: list[dict[str, float]]) -> dict[str, float]:
    """Union of metric dicts; a key reported by several policies (a role split across per-agent
    policies) gets the mean of their values."""
    seen: dict[str, list[float]] = {}
    for part in parts:
        for key, value in part.items():
            seen.setdefault(key, []).append(value)
    return {key: sum(values) / len(values) for key, values in seen.items()}
