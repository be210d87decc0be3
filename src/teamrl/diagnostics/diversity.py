"""Output diversity across duplicated agents: are three voters still saying different things?

For each role with several agents, the committed responses of its agents on one instance-turn are
compared: the distinct-answer ratio and the mean pairwise token-Jaccard distance, averaged over
the instance-turns of the step. Both are 0 when every agent says the same thing.
"""

from __future__ import annotations

from itertools import combinations

from teamrl.rollout.tree import Sample


def normalize(text: str) -> str:
    """Lower-cased, whitespace-collapsed text, so spacing alone never counts as a different answer."""
    return " ".join(text.lower().split())


def distinct_ratio(texts: list[str]) -> float:
    """(distinct - 1) / (n - 1): 0 when all texts agree, 1 when all differ.

    >>> distinct_ratio(["A", "a ", "b"])
    0.5
    """
    if len(texts) < 2:
        raise ValueError("diversity needs at least two texts")
    return (len({normalize(t) for t in texts}) - 1) / (len(texts) - 1)


def jaccard_distance(a: str, b: str) -> float:
    """1 - |A & B| / |A | B| over the sets of whitespace tokens (two empty texts: 0).

    >>> jaccard_distance("go up now", "go down now")
    0.5
    """
    sa, sb = set(normalize(a).split()), set(normalize(b).split())
    union = sa | sb
    return 1.0 - len(sa & sb) / len(union) if union else 0.0


def mean_pairwise_distance(texts: list[str]) -> float:
    """Mean token-Jaccard distance over all pairs of texts."""
    pairs = list(combinations(texts, 2))
    if not pairs:
        raise ValueError("diversity needs at least two texts")
    return sum(jaccard_distance(a, b) for a, b in pairs) / len(pairs)


def duplicated_diversity(samples: list[Sample]) -> dict[str, tuple[float, float]]:
    """{role: (mean distinct ratio, mean pairwise distance)} over instance-turns with >= 2 of its agents."""
    committed: dict[tuple[str, int, int], dict[str, str]] = {}
    for s in samples:
        if s.committed:
            committed.setdefault((s.role, s.episode, s.turn), {})[s.agent] = s.generation.text
    per_role: dict[str, list[tuple[float, float]]] = {}
    for (role, _, _), by_agent in committed.items():
        if len(by_agent) >= 2:
            texts = list(by_agent.values())
            per_role.setdefault(role, []).append((distinct_ratio(texts), mean_pairwise_distance(texts)))
    return {
        role: (sum(d for d, _ in vals) / len(vals), sum(j for _, j in vals) / len(vals))
        for role, vals in per_role.items()
    }
