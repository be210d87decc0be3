"""Per-role gradients inside one policy's update, even when several roles share that policy.

The update backpropagates each agent's part of a minibatch separately (agents of one role one
after another) and calls this tracker between the parts. Gradients of one role accumulate in
`.grad`; at the end of the role the tracker reads the role's exact gradient norm, optionally
damps it (gradient-coherence damping), moves it into an accumulator and clears `.grad` for the
next role. At the end of the minibatch the accumulated sum goes back into `.grad`, so the
optimizer sees sum_r scale_r * g_r (= the one-backward gradient when nothing is damped).

Per step it reports, under `diag/role/<role>/`: the gradient norm and its share of the policy's
gradient mass, the role's share of samples and tokens, clip fraction, entropy, KL to the
reference and to the rollout policy; and with `full`: temporal coherence cos(g, EMA(g)) and the
mean gradient cosine between the role's duplicated agents (`dup_grad_cos`).

The shares are written on every step the policy had a gradient, for every role the policy serves
(`roles`), 0 for a role with no sample that step: a step where one role's samples all carried no
signal (dropped as zero-advantage) is a step where the other role had the whole gradient, and
leaving it out would understate a dominant role. A role's gradient mass on a step is the sum of its
norms over the step's minibatches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from teamrl.diagnostics.sketch import GradientSketch, cosine, mean_pairwise_cosine

# Update statistics averaged per role with token weights (each part reports them over its tokens).
TOKEN_STATS = ("clip_frac", "entropy", "kl_ref", "approx_kl_old")


@dataclass
class _RoleStep:
    """One role's accumulators over the minibatches of one step."""

    norms: list[float] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)
    sketch: torch.Tensor | None = None  # the step's summed role gradient (undamped)
    agents: dict[str, torch.Tensor] = field(default_factory=dict)  # per-agent summed sketches
    stats: dict[str, float] = field(default_factory=dict)  # token-weighted sums
    tokens: float = 0.0
    samples: int = 0


class RoleGradients:
    """Per-role gradient bookkeeping (and coherence damping) of one policy, across steps."""

    def __init__(
        self,
        params: list[torch.nn.Parameter],
        *,
        full: bool = False,
        damping: float = 0.0,
        tau: float = 0.9,
        sketch_dim: int = 4096,
        exact_max_params: int = 4_000_000,
        seed: int = 0,
        roles: Sequence[str] = (),
    ) -> None:
        """roles: every role this policy serves (its shares are written for each, 0 when absent from a step);
        roles seen in the update are added to them."""
        if not 0.0 <= damping <= 1.0:
            raise ValueError(f"coherence damping lambda must lie in [0, 1], got {damping}")
        if not 0.0 <= tau < 1.0:
            raise ValueError(f"coherence EMA tau must lie in [0, 1), got {tau}")
        self.params = params
        self.full, self.damping, self.tau = full, damping, tau
        self.sketch = GradientSketch(params, sketch_dim, exact_max_params, seed)
        self.ema: dict[str, torch.Tensor] = {}  # per-role EMA of the step gradient sketch
        self._acc: list[torch.Tensor] | None = None
        self._prev: torch.Tensor | None = None  # cumulative sketch of the current role so far
        self._roles: dict[str, _RoleStep] = {}
        self.roles = tuple(roles)

    def state_dict(self) -> dict[str, dict[str, torch.Tensor]]:
        """What carries over between steps (each role's gradient EMA), for exact resume."""
        return {"ema": {role: ema.detach().cpu().clone() for role, ema in self.ema.items()}}

    def load_state_dict(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        device = self.params[0].device if self.params else torch.device("cpu")
        self.ema = {role: ema.to(device) for role, ema in state["ema"].items()}

    @property
    def needs_sketch(self) -> bool:
        return self.full or self.damping > 0

    def begin_step(self) -> None:
        self._roles = {}

    def agent_done(self, role: str, agent: str, stats: dict[str, float], tokens: float, samples: int) -> None:
        """Called after backpropagating one agent's part; `stats` are that part's token means."""
        step = self._roles.setdefault(role, _RoleStep())
        step.tokens += tokens
        step.samples += samples
        for key in TOKEN_STATS:
            if key in stats:
                step.stats[key] = step.stats.get(key, 0.0) + stats[key] * tokens
        if self.full:
            current = self.sketch()
            delta = current if self._prev is None else current - self._prev
            step.agents[agent] = delta if agent not in step.agents else step.agents[agent] + delta
            self._prev = current

    def role_done(self, role: str) -> float:
        """Close the role's part of the minibatch: record, damp, accumulate; returns the scale used."""
        step = self._roles.setdefault(role, _RoleStep())
        grads = [p.grad for p in self.params if p.grad is not None]
        squares = [(g.detach().float() ** 2).sum() for g in grads]
        step.norms.append(float(torch.sqrt(sum(squares[1:], squares[0]))) if grads else 0.0)
        scale = 1.0
        if self.needs_sketch:
            g = self._prev if self._prev is not None else self.sketch()
            step.sketch = g.clone() if step.sketch is None else step.sketch + g
            if self.damping > 0 and role in self.ema:
                scale = damping_scale(cosine(g, self.ema[role]), self.damping)
        step.scales.append(scale)
        if self._acc is None:
            self._acc = [torch.zeros_like(p) for p in self.params]
        for acc, p in zip(self._acc, self.params):
            if p.grad is not None:
                acc.add_(p.grad, alpha=scale)
                p.grad = None
        self._prev = None
        return scale

    def finish_minibatch(self) -> None:
        """Put the (damped) sum of the roles' gradients back into `.grad` for the optimizer."""
        if self._acc is None:
            return
        for acc, p in zip(self._acc, self.params):
            p.grad = acc
        self._acc = None

    def end_step(self) -> dict[str, float]:
        """This step's per-role metrics; then folds each role's step gradient into its EMA."""
        metrics: dict[str, float] = {}
        served = list(dict.fromkeys([*self.roles, *self._roles]))
        if len(served) > 1:  # shares of a policy that serves several roles
            absent = _RoleStep()
            mass = {role: sum(self._roles.get(role, absent).norms) for role in served}
            tokens = {role: self._roles.get(role, absent).tokens for role in served}
            samples = {role: self._roles.get(role, absent).samples for role in served}
            for role in served:
                key = f"diag/role/{role}/"
                if sum(mass.values()) > 0:
                    metrics[key + "grad_share"] = mass[role] / sum(mass.values())
                if sum(tokens.values()) > 0:
                    metrics[key + "tokens_share"] = tokens[role] / sum(tokens.values())
                    metrics[key + "samples_share"] = samples[role] / max(sum(samples.values()), 1)
        for role, s in self._roles.items():
            key = f"diag/role/{role}/"
            if s.norms:
                metrics[key + "grad_norm"] = sum(s.norms) / len(s.norms)
            for stat, value in s.stats.items():
                metrics[key + stat] = value / max(s.tokens, 1.0)
            if self.damping > 0 and s.scales:
                metrics[key + "damping_scale"] = sum(s.scales) / len(s.scales)
            if s.sketch is not None:
                if role in self.ema and float(s.sketch.norm()) > 0 and float(self.ema[role].norm()) > 0:
                    metrics[key + "coherence"] = cosine(s.sketch, self.ema[role])
                self.ema[role] = (
                    s.sketch if role not in self.ema else (self.tau * self.ema[role] + (1 - self.tau) * s.sketch)
                )
            dup = mean_pairwise_cosine(list(s.agents.values()))
            if dup is not None:
                metrics[key + "dup_grad_cos"] = dup
            for agent, vector in s.agents.items():
                metrics[f"diag/agent/{agent}/grad_norm"] = float(vector.norm())
        return metrics


def damping_scale(cos: float, lam: float) -> float:
    """1 - lambda * clamp(cos, 0, 1): a role that keeps pushing one way is slowed down.

    >>> damping_scale(0.5, 0.2)
    0.9
    >>> damping_scale(-0.7, 0.2)
    1.0
    """
    return 1.0 - lam * min(max(cos, 0.0), 1.0)
