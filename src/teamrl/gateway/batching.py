"""One thread owns the models: it gathers concurrent requests and samples them in batched engine calls.

Why one thread: torch modules are not re-entrant across threads for the same model state (a LoRA
policy switches the shared network's active adapter on every `policy.model` read), and K parallel
episodes asking the same policy at about the same time should cost one batched `sample` call, not K.

The worker waits for a first request, then gathers more until the gateway has been quiet for the
batching window (no request arrived and no answer was handed back for `window_s`), or `flush_at`
requests are pending (the number of episodes that may still call), or `max_wait_s` has passed since
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

Sampler = Callable[[Policy, list[list[int]], int, SamplingParams, torch.Generator], list[list[Generation]]]


@dataclass
class _Pending:
    policy: Policy
    params: SamplingParams
    prompt: list[int]
    future: Future = field(default_factory=Future)


class SamplingWorker:
    """Samples submitted prompts on one thread, batching concurrent ones per (policy, settings).

    window_s: a batch closes once no request has arrived and no answer was delivered for this long;
    max_wait_s: ...or once its first request has waited this long (default 10 windows); flush_at:
    sample at once when this many are pending (0: only the windows decide). `calls` counts sample requests (one per policy and settings; LoRA policies on one base share a decode call, `engine_routing.sample_many`), `batch_sizes` their sizes,
    for tests and metrics.
    """

    def __init__(
        self,
        generator: torch.Generator,
        window_s: float = 0.02,
        flush_at: int = 0,
        sampler: Sampler | None = None,
        max_wait_s: float | None = None,
    ) -> None:
        self.generator = generator
        self.window_s = window_s
        self.max_wait_s = 10 * window_s if max_wait_s is None else max_wait_s
        self._last_activity = time.monotonic()  # the latest request or delivered answer
        self.last_call_s = 0.0  # how long the latest engine call took (the waits grow with it)
        self.flush_at = flush_at
        self._sampler = sampler
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self._lock = threading.Lock()
        self._outstanding = 0  # submitted and not yet answered
        self.calls = 0
        self.batch_sizes: list[int] = []
        self._thread = threading.Thread(target=self._run, name="teamrl-gateway-sampler", daemon=True)
        self._thread.start()

    def submit(self, policy: Policy, params: SamplingParams, prompt: list[int]) -> Future:
        """A future of the one Generation sampled for `prompt` (an exception if sampling failed)."""
        if not self._thread.is_alive():
            raise RuntimeError("the sampling worker is closed")
        pending = _Pending(policy, params, prompt)
        with self._lock:
            self._outstanding += 1
            self._idle.clear()
        self._last_activity = time.monotonic()
        self._queue.put(pending)
        return pending.future

    def delivered(self) -> None:
        """A handler took its answer: its program will likely ask again soon, so the window restarts."""
        self._last_activity = time.monotonic()

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Block until nothing is queued or being sampled (so the models may be updated)."""
        return self._idle.wait(timeout_s)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _gather(self, first: _Pending) -> tuple[list[_Pending], bool]:
        """The first request and those arriving until the gateway is quiet for a window, flush_at are
        pending or max_wait_s has passed; (batch, whether to stop after it)."""
        batch, start = [first], time.monotonic()  # requests queued while sampling count from now
        window = max(self.window_s, WINDOW_SHARE * self.last_call_s)
        last_call = start + max(self.max_wait_s, WAIT_SHARE * self.last_call_s)
        while not (self.flush_at and len(batch) >= self.flush_at):
            left = min(max(self._last_activity, start) + window, last_call) - time.monotonic()
            if left <= 0:
                break
            try:
                item = self._queue.get(timeout=left)
            except queue.Empty:
                continue  # an answer delivered meanwhile may have moved the window on: look again
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
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
        for item in batch:
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
        requests = [SampleRequest(items[0].policy, [i.prompt for i in items], 1, items[0].params) for items in groups]
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
