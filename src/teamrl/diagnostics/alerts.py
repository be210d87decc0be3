"""Alerts raised from the stream of per-step metrics, in plain words.

- dominant role: in a policy shared by several roles, one role carries at least `dominant_share`
  of the gradient mass (trailing mean) while another role of that policy drifts toward it: its
  response length moved `drift_toward` of the way to the dominant role's baseline length, or its
  format adherence fell by `format_drop`;
- echo chamber: duplicated agents of one role pushed the policy the same way (their mean pairwise
  gradient cosine reached `echo_cosine` at one of the last `window` updates that had a gradient:
  the peak, not the mean, because the alignment can last one update, after which the agents fail
  alike and leave no gradient to compare) while their outputs converge (diversity, averaged over
  the window, fell by `diversity_drop` of its baseline, or below `diversity_floor`);
- collapse: held-out success fell `collapse_drop` below its peak; names the checkpoint to keep;
- stalled role: a role's candidates scored alike within every group for the last `window` steps (mean
  |advantage| at most `stall_adv` at each) while the team still fails often (training success below
  `stall_success`): that role gets no gradient. A role whose output ignores the policy (a scripted,
  hostile or broken teammate, a constant answer) or a task too hard for it looks like this.

An alert fires when its condition becomes true and again only after the condition cleared, so a
persisting problem is reported once, not every step. Thresholds live in `DiagnosticsConfig`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from teamrl.config import DiagnosticsConfig
from teamrl.diagnostics.drift import Baselines, Windows


@dataclass(frozen=True)
class Alert:
    """One alert: what (kind), about whom (subject), when, and the message a person reads."""

    step: int
    kind: str  # dominant_role, echo_chamber, collapse or stalled_role
    subject: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class AlertMonitor:
    """Watches the metrics of each step; `observe` returns the alerts that fire at that step."""

    def __init__(self, config: DiagnosticsConfig, policy_roles: dict[str, list[str]]) -> None:
        """policy_roles: each policy's roles; dominance is watched in the policies with several."""
        self.config = config
        self.shared = {policy: roles for policy, roles in policy_roles.items() if len(roles) > 1}
        self.baselines = Baselines(config.baseline_steps)
        self.windows = Windows(config.window)
        self.peak: tuple[float, int] | None = None  # (held-out success, step)
        self._active: set[tuple[str, str]] = set()

    def state_dict(self) -> dict[str, Any]:
        """Baselines, windows, peak and the alerts still active (a resumed run continues from them)."""
        return {
            "baselines": self.baselines.state_dict(),
            "windows": self.windows.state_dict(),
            "peak": self.peak,
            "active": sorted(self._active),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.baselines.load_state_dict(state["baselines"])
        self.windows.load_state_dict(state["windows"])
        self.peak = tuple(state["peak"]) if state["peak"] is not None else None
        self._active = {tuple(key) for key in state["active"]}

    def observe(self, step: int, metrics: dict[str, float]) -> list[Alert]:
        self.baselines.observe(metrics)
        self.windows.observe(metrics)
        found = self._dominant(step) + self._echo(step, metrics) + self._collapse(step, metrics) + self._stalled(step)
        fired = [a for a in found if (a.kind, a.subject) not in self._active]
        # Conditions that no longer hold are re-armed; collapse only re-arms on held-out steps.
        evaluated = "eval/success" in metrics
        self._active = {key for key in self._active if key[0] == "collapse" and not evaluated}
        self._active |= {(a.kind, a.subject) for a in found}
        return fired

    def _dominant(self, step: int) -> list[Alert]:
        c, out = self.config, []
        for policy, roles in self.shared.items():
            means = {r: self.windows.mean(f"diag/role/{r}/grad_share") for r in roles}
            shares = {r: v for r, v in means.items() if v is not None}
            if not shares:
                continue
            top = max(shares, key=shares.__getitem__)
            if shares[top] < c.dominant_share:
                continue
            for other in roles:
                if other == top:
                    continue
                why = self._drift_toward(other, top)
                if why:
                    out.append(
                        Alert(
                            step,
                            "dominant_role",
                            f"{top}>{other}",
                            (
                                f"Dominant role: role '{top}' carries {shares[top]:.0%} of the gradient of "
                                f"policy '{policy}' (threshold {c.dominant_share:.0%}), and role '{other}' is "
                                f"drifting toward it: {why}. The shared policy may be teaching every role to "
                                f"act like '{top}'. Mitigations: algorithm.role_balanced: true, a KL anchor for "
                                f"'{other}' (algorithm.kl_coef_by_role), or separate policies per role."
                            ),
                        )
                    )
        return out

    def _drift_toward(self, other: str, top: str) -> str:
        c, reasons = self.config, []
        base_o = self.baselines.get(f"diag/role/{other}/response_len")
        base_t = self.baselines.get(f"diag/role/{top}/response_len")
        now_o = self.windows.mean(f"diag/role/{other}/response_len")
        if base_o is not None and base_t is not None and now_o is not None and abs(base_t - base_o) >= c.min_length_gap:
            moved = (now_o - base_o) / (base_t - base_o)
            if moved >= c.drift_toward:
                reasons.append(
                    f"its responses went from {base_o:.1f} to {now_o:.1f} tokens on average "
                    f"('{top}' started at {base_t:.1f})"
                )
        fmt_base = self.baselines.get(f"diag/role/{other}/format_ok")
        fmt_now = self.windows.mean(f"diag/role/{other}/format_ok")
        if fmt_base is not None and fmt_now is not None and fmt_base - fmt_now >= c.format_drop:
            reasons.append(f"its well-formed answers fell from {fmt_base:.0%} to {fmt_now:.0%}")
        return "; ".join(reasons)

    def _echo(self, step: int, metrics: dict[str, float]) -> list[Alert]:
        c, out, n = self.config, [], self.config.window
        roles = [
            k.split("/")[2] for k in self.windows.keys() if k.startswith("diag/role/") and k.endswith("/dup_grad_cos")
        ]
        for role in roles:
            cos = self.windows.peak(f"diag/role/{role}/dup_grad_cos")
            base = self.baselines.get(f"diag/role/{role}/diversity")
            now = self.windows.mean(f"diag/role/{role}/diversity")
            if cos is None or base is None or now is None or cos < c.echo_cosine:
                continue
            if now <= max(c.diversity_floor, (1 - c.diversity_drop) * base):
                out.append(
                    Alert(
                        step,
                        "echo_chamber",
                        role,
                        (
                            f"Echo chamber: the duplicated '{role}' agents push the policy the same way "
                            f"(gradient cosine up to {cos:.2f} over their last {n} updates, threshold "
                            f"{c.echo_cosine:.2f}) and their outputs are converging (diversity {base:.2f} at "
                            f"the start, {now:.2f} now). They may become confidently wrong together. "
                            f"Mitigations: separate policies per agent (regime: per_agent), per-agent rewards "
                            f"(tree grouping, or algorithm.trajectory_credit: per_agent), or "
                            f"algorithm.coherence_damping."
                        ),
                    )
                )
        return out

    def _stalled(self, step: int) -> list[Alert]:
        c, out = self.config, []
        success = self.windows.mean("train/success")
        if success is None or success >= c.stall_success:
            return []  # a team that mostly succeeds leaves roles without signal because they are done
        for key in self.windows.keys():
            if not (key.startswith("diag/role/") and key.endswith("/adv_abs")):
                continue
            role, largest = key.split("/")[2], self.windows.peak(key)
            if largest is not None and largest <= c.stall_adv:
                out.append(
                    Alert(
                        step,
                        "stalled_role",
                        role,
                        (
                            f"Stalled role: every group of role '{role}' scored its candidates alike for the last "
                            f"{c.window} steps (mean |advantage| at most {largest:.1e}), so it gets no gradient, while "
                            f"the team succeeds in only {success:.0%} of its training episodes. Its output may not "
                            f"depend on its policy (a scripted, hostile or broken teammate; one constant answer), or "
                            f"its reward may not separate its candidates (check its reward terms, a larger k, a "
                            f"higher temperature for it: rollout.by_role.{role})."
                        ),
                    )
                )
        return out

    def _collapse(self, step: int, metrics: dict[str, float]) -> list[Alert]:
        value = metrics.get("eval/success")
        if value is None:
            return []
        if self.peak is None or value > self.peak[0]:
            self.peak = (value, step)
            return []
        peak, at = self.peak
        if peak - value < self.config.collapse_drop:
            return []
        kept = (
            f"checkpoints/best (saved at step {at})"
            if at > 0
            else "the initial model (step 0; policy.model), since training never beat it"
        )
        return [
            Alert(
                step,
                "collapse",
                "eval/success",
                (
                    f"Collapse: held-out success fell to {value:.1%}, {peak - value:.1%} below its peak of "
                    f"{peak:.1%} at step {at} (threshold {self.config.collapse_drop:.0%}). The best model is "
                    f"{kept}; use it rather than the final weights."
                ),
            )
        ]
