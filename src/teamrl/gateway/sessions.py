"""Episode sessions: which calls one run of a user's program made, in order, and what it was answered.

Every run of the program gets its own session (its own base URL and API key), so its calls are
attributed to it however many runs share the server. A call's index counts that agent's calls in the
session: (instance, agent, call index) is the AT-GRPO group key of program episodes.

Replay: a session may be given an earlier run's calls; a call whose (agent, index) is in the replay
set is answered with the recorded response instead of a new sample, provided its prompt is the
recorded prompt token for token. A different prompt means the program is not deterministic given its
responses (it reads a clock, a random number, a live service): the session notes it and samples anew.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field

from teamrl.rollout.builtin_engine import Generation


@dataclass
class Call:
    """One chat completion served to an episode."""

    agent: str
    index: int  # this agent's call count in the session before this call
    messages: list[dict]  # as the request sent them (tool calls and results included)
    generation: Generation  # prompt_ids, response_ids [T], logprobs [T]: exactly what was sampled
    replayed: bool = False  # answered from the replay set, not sampled in this run


@dataclass
class EpisodeSession:
    """The calls of one run of the program, and the limits and state that govern it."""

    id: str
    instance: int
    agents: frozenset[str]
    max_calls: int  # per agent; a further call is refused (400)
    key: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    serial: int = 0  # the order sessions were opened in: its requests' place in a shared batch
    calls: list[Call] = field(default_factory=list)
    replay: dict[tuple[str, int], Call] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)  # why replayed prompts differed
    closed: bool = False  # finished, timed out or dropped: later calls are refused (410)
    _counts: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_index(self, agent: str) -> int | None:
        """Reserve the agent's next call index (in arrival order); None when its call budget is spent."""
        with self._lock:
            index = self._counts.get(agent, 0)
            if index >= self.max_calls:
                return None
            self._counts[agent] = index + 1
            return index

    def release(self, agent: str, index: int) -> None:
        """Give back a reserved call index whose call was never answered (its client left), if it is the
        agent's latest: a later call then takes it (an earlier one leaves a gap in the indices)."""
        with self._lock:
            if self._counts.get(agent) == index + 1:
                self._counts[agent] = index

    def replayed(self, agent: str, index: int, prompt_ids: list[int]) -> Generation | None:
        """The recorded answer of this call when it is replayed and its prompt matches; notes a mismatch."""
        recorded = self.replay.get((agent, index))
        if recorded is None:
            return None
        if recorded.generation.prompt_ids != prompt_ids:
            self.mismatches.append(f"{agent} call {index}: the replayed prompt differs from the recorded one")
            return None
        return recorded.generation

    def record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def sampled_calls(self) -> list[Call]:
        """The calls sampled in this run (not replayed), in arrival order."""
        return [c for c in self.calls if not c.replayed]


class SessionTable:
    """The live sessions by id; the server looks a request's session up here."""

    def __init__(self) -> None:
        self._sessions: dict[str, EpisodeSession] = {}
        self._lock = threading.Lock()
        self._count = 0

    def open(self, instance: int, agents: frozenset[str], max_calls: int) -> EpisodeSession:
        with self._lock:
            self._count += 1
            session = EpisodeSession(f"e{self._count}", instance, agents, max_calls, serial=self._count)
            self._sessions[session.id] = session
            return session

    def get(self, session_id: str) -> EpisodeSession | None:
        with self._lock:
            return self._sessions.get(session_id)

    def close(self, session: EpisodeSession) -> None:
        """Refuse the session's further calls and forget it."""
        session.closed = True
        with self._lock:
            self._sessions.pop(session.id, None)

    def live(self) -> int:
        with self._lock:
            return len(self._sessions)
