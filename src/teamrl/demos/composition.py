"""What scripted demonstrations are made of: the share of each behaviour each agent chose.

A study must show that the warm-up's prior is broad, not a planted mistake; this counts it from the
scripts themselves rather than stating it by hand.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable
from typing import Any

from teamrl.demos.driver import play_episode
from teamrl.workflows.base import Workflow

RecordingRespond = Callable[[str, Any, random.Random, collections.Counter], str]
"""(agent, state, rng, record) -> response; adds 1 to record['<agent>/<behaviour kind>']."""


def count_behaviours(workflow: Workflow, respond: RecordingRespond, episodes: int, seed: int = 0) -> dict[str, float]:
    """Per agent, the share of its answers of each behaviour kind ('<agent>/<kind>'), and 'team/success':
    the share of the scripted episodes (on training instances) that were solved."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    rng = random.Random(seed)
    record: collections.Counter = collections.Counter()
    solved = 0
    for index in range(episodes):
        state = workflow.new_state("train", index)
        collections.deque(play_episode(workflow, state, lambda a, s, r: respond(a, s, r, record), rng), maxlen=0)
        solved += bool(workflow.success(state))
    per_agent: collections.Counter[str] = collections.Counter()
    for key, count in record.items():
        per_agent[key.split("/")[0]] += count
    shares = {key: count / per_agent[key.split("/")[0]] for key, count in sorted(record.items())}
    return shares | {"team/success": solved / episodes}
