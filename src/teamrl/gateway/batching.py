"""One thread owns the models: it gathers concurrent requests and samples them in batched engine calls.

Why one thread: torch modules are not re-entrant across threads for the same model state (a LoRA
policy switches the shared network's active adapter on every `policy.model` read), and K parallel
episodes asking the same policy at about the same time should cost one batched `sample` call, not K.

The worker waits for a first request, then gathers more until the gateway has been quiet for the
batching window (no request arrived and no answer was handed back for `window_s`), or `flush_at`
requests are pending, or `max_wait_s` has passed since
the first; then it samples each (policy, settings) group in one call of the policy's engine
(`teamrl.rollout.engine_routing.sample`). Why "quiet" and not "the first request's window": the HTTP server
hands a batch's K answers back one after another before it reads the next requests, and under load
that takes longer than the window, so a window counted from the first request split one turn's K
requests into several engine calls (measured, 32 runs on the tiny default: [1, 31], [2, 30], [16, 16]
per turn; benchmarks/gateway_throughput.py). Handlers report each answer they take (`delivered`).

Both waits grow with the engine: the window is at least `WINDOW_SHARE` and the cap at least `WAIT_SHARE`
of the last engine call's duration. A request that misses a batch costs a whole further call, which on a
real model takes seconds (a decode is memory-bound: 16 rows cost about what 32 do), so waiting a few
percent of a call for a straggler pays; on the tiny model calls take milliseconds and the configured
window decides. Measured on SmolLM2-135M with 32 lock-step runs: with the fixed 20 ms window two of three
rounds split each turn into two calls of 16 (benchmarks/results/gateway_throughput/unknown-host/gateway_throughput.txt).

Episodes: when the program runner tells the worker which episodes are running (`episode_started`,
`episode_ended`, and the `episode` of each request), a batch instead closes once every running episode
has a request pending, or once nothing happened (no request, no answer, no episode start or end) for
`straggler_s`; an episode that missed a batch that way (busy in a slow tool, or hung) is not waited for
again until it asks, so it costs its step one such wait, not one per batch. Why: the arrival times of one turn's requests depend on how the program makes its client,
not only on the model. Measured on the tiny default with 16 runs of 3 calls (2 cores, loaded): requests
a few ms apart with one shared client, but 26-113 ms gaps while 16 threads built their connections or
`OpenAI(...)` clients (about 34 ms of CPU each), so the 20 ms quiet window split a turn into 5 calls of
mean 9.6 one time and 3 calls of 16 the next. Counting episodes makes the batches a function of the
programs' calls, not of their timing; and each batch is sampled in a fixed row order (`order`: the
episode's open order, agent, call index), so with one seed the same batches draw the same tokens.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch

from teamrl.policies.loading import Policy
from teamrl.rollout import engine_routing
from teamrl.rollout.builtin_engine import Generation, SamplingParams
from teamrl.rollout.sampler import SampleRequest

log = logging.getLogger("teamrl.gateway")

WINDOW_SHARE = 0.02
"""The quiet window is at least this share of the last engine call's seconds."""
WAIT_SHARE = 0.1
"""A batch's longest wait is at least this share of the last engine call's seconds."""
STRAGGLER_S = 2.0
"""With episodes running: how long a batch waits for the running episodes that have not asked yet, counted
from the latest request, answer, episode start or end."""

Sampler = Callable[[Policy, list[list[int]], int, SamplingParams, torch.Generator], list[list[Generation]]]


TokenCallback = Callable[[int], None]
"""A streaming request's sink: called on the worker thread with each token id its row draws."""


@dataclass
class _Pending:
    policy: Policy
    params: SamplingParams
    prompt: list[int]
    episode: str | None = None  # the running episode that asked (see `episode_started`)
    order: tuple = ()  # where it goes in its batch (arrival order after every ordered request)
    on_token: TokenCallback | None = None
    future: Future = field(default_factory=Future)


_WAKE = object()
"""Queued by `episode_ended`: a gathering batch looks again whether every running episode has asked."""


class SamplingWorker:
    """Samples submitted prompts on one thread, batching concurrent ones per (policy, settings).

    window_s: a batch closes once no request has arrived and no answer was delivered for this long;
    max_wait_s: ...or once its first request has waited this long (default 10 windows); flush_at:
    sample at once when this many are pending (0: only the windows decide). While episodes are running
    (`episode_started`), those three give way to "every running episode asked", bounded by straggler_s. `calls` counts sample requests (one per policy and settings; LoRA policies on one base share a decode call, `engine_routing.sample_many`), `batch_sizes` their sizes,
    for tests and metrics.
    """

    def __init__(
        self,
        generator: torch.Generator,
        window_s: float = 0.02,
        flush_at: int = 0,
        sampler: Sampler | None = None,
        max_wait_s: float | None = None,
        straggler_s: float = STRAGGLER_S,
    ) -> None:
        self.generator = generator
        self.window_s = window_s
        self.max_wait_s = 10 * window_s if max_wait_s is None else max_wait_s
        self._last_activity = time.monotonic()  # the latest request or delivered answer
        self.last_call_s = 0.0  # how long the latest engine call took (the waits grow with it)
        self.flush_at = flush_at
        self.straggler_s = straggler_s
        self._sampler = sampler
        self._running: set[str] = set()  # episodes the runner reported started and not yet ended
        self._away: set[str] = set()  # running episodes a batch gave up waiting for, until they ask again
        self._arrivals = 0
        self._queue: queue.Queue[_Pending | object | None] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self._lock = threading.Lock()
        self._outstanding = 0  # submitted and not yet answered
        self.calls = 0
        self.batch_sizes: list[int] = []
        self._thread = threading.Thread(target=self._run, name="teamrl-gateway-sampler", daemon=True)
        self._thread.start()

    def submit(
        self,
        policy: Policy,
        params: SamplingParams,
        prompt: list[int],
        episode: str | None = None,
        order: tuple = (),
        on_token: TokenCallback | None = None,
    ) -> Future:
        """A future of the one Generation sampled for `prompt` (an exception if sampling failed).

        episode: the running episode asking (batches wait for every running one); order: the request's
        place in its batch (requests without one follow, in arrival order); on_token: streaming, called
        with each token the row draws as the decode goes (built-in engine; other engines draw it whole).
        """
        if not self._thread.is_alive():
            raise RuntimeError("the sampling worker is closed")
        with self._lock:
            self._arrivals += 1
            arrival = self._arrivals
            self._away.discard(episode or "")
        pending = _Pending(
            policy, params, prompt, episode, (0, order, arrival) if order else (1, (), arrival), on_token
        )
        with self._lock:
            self._outstanding += 1
            self._idle.clear()
        self._last_activity = time.monotonic()
        self._queue.put(pending)
        return pending.future

    def delivered(self) -> None:
        """A handler took its answer: its program will likely ask again soon, so the window restarts."""
        self._last_activity = time.monotonic()

    def episode_started(self, *episodes: str) -> None:
        """These episodes are running: batches wait for their requests (until they end or straggler_s passes).
        Mark them before they can ask, or a batch may close on the requests of those marked so far."""
        with self._lock:
            self._running.update(episodes)
        self._last_activity = time.monotonic()

    def episode_ended(self, episode: str, then: str | None = None) -> None:
        """`episode` makes no more requests (`then`: the episode that runs in its place, marked in the same
        step so no batch closes between the two); a batch waiting for it may close now."""
        with self._lock:
            self._running.discard(episode)
            self._away.discard(episode)
            if then is not None:
                self._running.add(then)
        self._last_activity = time.monotonic()
        self._queue.put(_WAKE)

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Block until nothing is queued or being sampled (so the models may be updated)."""
        return self._idle.wait(timeout_s)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _gather(self, first: _Pending) -> tuple[list[_Pending], bool]:
        """The first request and those arriving until the batch may close (`_full`, or the waits: see the
        class doc); (batch, whether to stop after it)."""
        batch, start = [first], time.monotonic()  # requests queued while sampling count from now
        window = max(self.window_s, WINDOW_SHARE * self.last_call_s)
        last_call = start + max(self.max_wait_s, WAIT_SHARE * self.last_call_s)
        straggler = max(self.straggler_s, WAIT_SHARE * self.last_call_s)
        while not self._full(batch):
            with self._lock:
                by_episode = bool(self._running)
            if by_episode:  # running episodes known: wait for them, however their requests are spaced
                left = max(self._last_activity, start) + straggler - time.monotonic()
            else:
                left = min(max(self._last_activity, start) + window, last_call) - time.monotonic()
            if left <= 0:
                if by_episode:  # those that did not ask are busy elsewhere: the next batches go without them
                    with self._lock:
                        self._away |= self._running - {item.episode for item in batch}
                break
            try:
                item = self._queue.get(timeout=left)
            except queue.Empty:
                continue  # an answer delivered meanwhile may have moved the window on: look again
            if item is None:
                return batch, True
            if isinstance(item, _Pending):
                batch.append(item)
        return batch, False

    def _full(self, batch: list[_Pending]) -> bool:
        """Every running episode (but those away) has a request in `batch`, else flush_at are pending."""
        with self._lock:
            running, waited = bool(self._running), self._running - self._away
        if running:
            return waited <= {item.episode for item in batch}
        return bool(self.flush_at and len(batch) >= self.flush_at)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            if not isinstance(first, _Pending):  # a wake-up with nothing to gather
                continue
            batch, stop = self._gather(first)
            self._sample(batch)
            with self._lock:
                self._outstanding -= len(batch)
                if self._outstanding == 0:
                    self._idle.set()
            if stop:
                return

    def _sample(self, batch: list[_Pending]) -> None:
        groups: dict[tuple[int, SamplingParams], list[_Pending]] = {}
        for item in sorted(batch, key=lambda i: i.order):  # rows in a fixed order: the draws do not
            # depend on which request's connection happened to be read first
            if item.future.set_running_or_notify_cancel():  # a cancelled request (its client left) is skipped
                groups.setdefault((id(item.policy), item.params), []).append(item)
        if not groups:
            return
        if self._sampler is None:  # the policies' engines: LoRA policies on one base share a decode call
            self._draw(list(groups.values()), lambda requests: engine_routing.sample_many(requests, self.generator))
            return
        for items in groups.values():
            self._draw(
                [items],
                lambda requests: [self._sampler(r.policy, r.prompts, 1, r.params, self.generator) for r in requests],
            )

    def _draw(self, groups: list[list[_Pending]], draw) -> None:
        """Sample every group (one request each); a failure answers each of their requests with it."""
        requests = [
            SampleRequest(items[0].policy, [i.prompt for i in items], 1, items[0].params, _row_sink(items))
            for items in groups
        ]
        started = time.monotonic()
        try:
            drawn = draw(requests)
        except Exception as err:  # the handlers answer 500 with the reason; the worker keeps serving
            log.exception("gateway sampling failed")
            for items in groups:
                for item in items:
                    item.future.set_exception(err)
            return
        self.last_call_s = time.monotonic() - started
        for items, result in zip(groups, drawn, strict=True):
            self.calls += 1
            self.batch_sizes.append(len(items))
            for item, group in zip(items, result, strict=True):
                item.future.set_result(group[0])


def _row_sink(items: list[_Pending]):
    """The token sink of one sample request over `items` (one row each): row i's tokens go to item i's
    `on_token`; None when no item streams (the engine then runs without a hook)."""
    callbacks = [item.on_token for item in items]
    if all(c is None for c in callbacks):
        return None

    def sink(rows: list[int], tokens: list[int]) -> None:
        for row, token in zip(rows, tokens, strict=True):
            callback = callbacks[row]
            if callback is not None:
                callback(token)

    return sink
