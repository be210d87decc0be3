"""One thread owns the models: it gathers concurrent requests and samples them in batched engine calls.

Why one thread: torch modules are not re-entrant across threads for the same model state (a LoRA
policy switches the shared network's active adapter on every `policy.model` read), and K parallel
episodes asking the same policy at about the same time should cost one batched `sample` call, not K.

The worker waits for a first request, then gathers more until the batching window has passed or
`flush_at` requests are pending (the number of episodes that may still call), and samples each
(policy, settings) group in one call of the policy's engine (`teamrl.rollout.engines.sample`).
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
from teamrl.rollout import engines
from teamrl.rollout.engine import Generation, SamplingParams

log = logging.getLogger("teamrl.gateway")

Sampler = Callable[[Policy, list[list[int]], int, SamplingParams, torch.Generator], list[list[Generation]]]


@dataclass
class _Pending:
    policy: Policy
    params: SamplingParams
    prompt: list[int]
    future: Future = field(default_factory=Future)


class SamplingWorker:
    """Samples submitted prompts on one thread, batching concurrent ones per (policy, settings).

    window_s: how long the first request of a batch waits for company; flush_at: sample at once when
    this many are pending (0: only the window decides). `calls` counts engine calls, `batch_sizes`
    their sizes, for tests and metrics.
    """

    def __init__(self, generator: torch.Generator, window_s: float = 0.02, flush_at: int = 0,
                 sampler: Sampler | None = None) -> None:
        self.generator = generator
        self.window_s = window_s
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
        self._queue.put(pending)
        return pending.future

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Block until nothing is queued or being sampled (so the models may be updated)."""
        return self._idle.wait(timeout_s)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _gather(self, first: _Pending) -> tuple[list[_Pending], bool]:
        """The first request and those arriving within the window; (batch, whether to stop after it)."""
        batch, deadline = [first], time.monotonic() + self.window_s
        while not (self.flush_at and len(batch) >= self.flush_at):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                item = self._queue.get(timeout=left)
            except queue.Empty:
                break
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
        for items in groups.values():
            sample = self._sampler or engines.sample
            try:
                drawn = sample(items[0].policy, [i.prompt for i in items], 1, items[0].params, self.generator)
            except Exception as err:  # the handlers answer 500 with the reason; the worker keeps serving
                log.exception("gateway sampling failed")
                for item in items:
                    item.future.set_exception(err)
                continue
            self.calls += 1
            self.batch_sizes.append(len(items))
            for item, group in zip(items, drawn, strict=True):
                item.future.set_result(group[0])
