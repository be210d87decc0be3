"""Per-role and per-agent statistics of one step's rollout samples (all candidates, not just commits).

Format adherence reads `Outcome.terms["format_ok"]` (1/0) when the workflow records it, else the
`format` term's sign: every workflow gives a malformed answer a negative one, while a well-formed answer
gets a bonus (math, planning) or nothing (Split-Calc, Split-Nav, a code tester whose tests catch no
program), so well formed is `format >= 0`. Accuracies are the means of `correct`, `any_correct` and
`verdict_correct` terms where present.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import fmean, pstdev

from teamrl.diagnostics.diversity import duplicated_diversity
from teamrl.rollout.tree import Sample

ACCURACY_TERMS = ("correct", "any_correct", "verdict_correct")


def well_formed(terms: Mapping[str, float]) -> float | None:
    """1.0 / 0.0 when an outcome's terms say whether its answer was well formed, else None."""
    if "format_ok" in terms:
        return float(bool(terms["format_ok"]))
    if "format" in terms:
        return float(terms["format"] >= 0)
    return None


def format_ok(sample: Sample) -> float | None:
    """1.0 / 0.0 when the sample's outcome says whether it was well formed, else None."""
    return well_formed(sample.outcome.terms)


def group_stats(samples: list[Sample], prefix: str) -> dict[str, float]:
    """Reward, advantage, length, format and accuracy statistics of one group of samples."""
    rewards = [s.reward for s in samples]
    advantages = [s.advantage for s in samples]
    out = {
        prefix + "reward_mean": fmean(rewards),
        prefix + "reward_std": pstdev(rewards),
        prefix + "adv_mean": fmean(advantages),
        prefix + "adv_std": pstdev(advantages),
        prefix + "adv_abs": fmean(abs(a) for a in advantages),
        prefix + "response_len": fmean(len(s.generation.response_ids) for s in samples),
        prefix + "samples": float(len(samples)),
    }
    formats = [f for f in map(format_ok, samples) if f is not None]
    if formats:
        out[prefix + "format_ok"] = fmean(formats)
    for term in ACCURACY_TERMS:
        values = [float(s.outcome.terms[term]) for s in samples if term in s.outcome.terms]
        if values:
            out[prefix + term] = fmean(values)
    return out


def rollout_diagnostics(samples: list[Sample], with_diversity: bool = False) -> dict[str, float]:
    """`diag/role/<role>/...` and `diag/agent/<agent>/...` statistics (+ duplicated-agent diversity)."""
    out: dict[str, float] = {}
    by_role: dict[str, list[Sample]] = {}
    by_agent: dict[str, list[Sample]] = {}
    for s in samples:
        by_role.setdefault(s.role, []).append(s)
        by_agent.setdefault(s.agent, []).append(s)
    for role, mine in by_role.items():
        out.update(group_stats(mine, f"diag/role/{role}/"))
    agents_per_role = {role: {s.agent for s in mine} for role, mine in by_role.items()}
    for agent, mine in by_agent.items():
        if len(agents_per_role[mine[0].role]) > 1:  # a lone agent's stats are its role's
            out.update(group_stats(mine, f"diag/agent/{agent}/"))
    if with_diversity:
        for role, (distinct, distance) in duplicated_diversity(samples).items():
            out[f"diag/role/{role}/distinct_ratio"] = distinct
            out[f"diag/role/{role}/diversity"] = distance
    return out
