"""A user's own task, trained with `teamrl train examples/relay_team.yaml` (docs/howto/own-workflow.md).

Relay: a *reader* sees a secret code of digits and writes a message; a *writer* sees only that message
and must answer the code. The team succeeds only if both do their part: the writer never sees the
secret. The scripted agents that warm up the tiny default
model are right only some of the time (the reader copies the code exactly half the time, else writes
random digits; the writer copies the message 80% of the time, else random digits): their errors are
noise, not a systematic mistake, so RL has to make the team reliably do what its prior only sometimes
does. This file registers the task; the config names it with `task.module`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from teamrl.workflows.base import Agent, Outcome
from teamrl.config.tasks import register_task


@dataclass
class RelaySettings:
    """The relay task's own keys (`task.<key>` in the config)."""

    digits: int = 3
    """Length of the secret code."""

    def __post_init__(self) -> None:
        if not 1 <= self.digits <= 8:
            raise ValueError(f"task.digits = {self.digits} is invalid: expected 1 <= digits <= 8")


@dataclass
class RelayState:
    secret: str
    message: str | None = None
    answer: str | None = None


def _digits_only(response: str, n: int) -> str | None:
    """The first n characters if they are all digits, else None (the format the prompts ask for)."""
    head = response.strip()[:n]
    return head if len(head) == n and head.isdigit() else None


class RelayTeam:
    """reader (sees the secret) -> writer (sees the message); one turn each."""

    agents = [Agent("reader", "reader"), Agent("writer", "writer")]
    parallel = False
    max_turns = 1

    def __init__(self, settings: RelaySettings) -> None:
        self.settings = settings

    def new_state(self, split: str, index: int) -> RelayState:
        # Held-out codes come from another seed range, so they are (almost all) unseen in training.
        rng = random.Random(index + (10**9 if split == "heldout" else 0))
        return RelayState("".join(rng.choice("0123456789") for _ in range(self.settings.digits)))

    def render(self, agent: str, state: RelayState) -> str:
        if agent == "reader":
            return f"reader\ncode:{state.secret}\nmsg>"
        return f"writer\nmsg:{state.message}\nans>"

    def apply(self, agent: str, state: RelayState, response: str) -> Outcome:
        text = _digits_only(response, self.settings.digits)
        if agent == "reader":
            state.message = text if text is not None else response.strip()[: self.settings.digits]
            # Each candidate is scored when it is made (AT-GRPO's immediate rewards): the reader's is
            # whether its message carries the code, the writer's whether its answer is the code.
            relayed = float(text == state.secret)
            return Outcome(team=relayed, local=0.1 if text is not None else -0.1,
                           terms={"format_ok": float(text is not None), "correct": relayed})
        state.answer = text
        correct = float(text == state.secret)
        return Outcome(team=correct, local=0.1 if text is not None else -0.1,
                       terms={"format_ok": float(text is not None), "correct": correct})

    def is_done(self, state: RelayState) -> bool:
        return state.answer is not None

    def success(self, state: RelayState) -> bool:
        return state.answer == state.secret


def scripted_relay(agent: str, state: RelayState, rng: random.Random) -> str:
    """The warm-up's scripted agents: right only some of the time, wrong at random."""
    n = len(state.secret)
    noise = "".join(rng.choice("0123456789") for _ in range(n))
    if agent == "reader":
        return state.secret if rng.random() < 0.5 else noise
    return state.message if rng.random() < 0.8 and state.message else noise


register_task("relay", workflow=RelayTeam, settings=RelaySettings, script=scripted_relay)
