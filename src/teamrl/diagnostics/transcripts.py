"""Training transcripts: what each agent said in a training episode, with its reward and advantage."""

from __future__ import annotations

from typing import Any

from teamrl.rollout.tree import Episode, Sample


def training_transcripts(samples: list[Sample], episodes: list[Episode], count: int) -> list[dict[str, Any]]:
    """The first `count` episodes; each turn carries the committed candidate's advantage.

    Episode transcripts hold the committed response of every agent turn; its advantage is that of
    the committed sample of (episode, turn, agent), and `candidates` says how many were sampled.
    """
    committed: dict[tuple[int, int, str], Sample] = {}
    candidates: dict[tuple[int, int, str], int] = {}
    for s in samples:
        key = (s.episode, s.turn, s.agent)
        candidates[key] = candidates.get(key, 0) + 1
        if s.committed:
            committed[key] = s
    out = []
    for index, episode in enumerate(episodes[:count]):
        turns = []
        for turn in episode.transcript:
            key = (index, turn["turn"], turn["agent"])
            chosen = committed.get(key)
            turns.append(
                {
                    **turn,
                    "role": chosen.role if chosen else None,
                    "advantage": chosen.advantage if chosen else None,
                    "candidates": candidates.get(key, 0),
                }
            )
        out.append({"instance": episode.instance, "success": episode.success, "turns": turns})
    return out
