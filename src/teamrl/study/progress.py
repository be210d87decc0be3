"""A running cell's progress on the study's terminal: its training steps and held-out evaluations.

The training loop logs one INFO record per step ("step k/N: train success ...") and one per held-out
evaluation to the `teamrl` logger (and to the run's train.log); the study's own scoring (an untrained
row's validation passes, every cell's test) logs one per pass ("held-out scoring: ..."). While a cell
runs, `cell_progress` forwards them to the study's log, prefixed with the cell and its elapsed time:
every evaluation and scoring pass, and a step when `every_s` seconds have passed since the last forwarded
step, or when it is a run's last step, so a 60-step run of a fast model prints a few lines, not sixty.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STEP = re.compile(r"^step (\d+)/(\d+):")
HELD_OUT = re.compile(r"^held-out (evaluation at step \d+|scoring):")  # the loop's evaluations, the study's scoring
STEP_EVERY_S = 20.0
"""Seconds between two forwarded step lines (a run's last step is always forwarded)."""


class _Forward(logging.Handler):
    def __init__(self, log: Callable[[str], None], prefix: str, every_s: float, clock: Callable[[], float]) -> None:
        super().__init__(logging.INFO)
        self.log, self.prefix, self.every_s, self.clock = log, prefix, every_s, clock
        self.started = clock()
        self.last_step: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        step = STEP.match(text)
        now = self.clock()
        if step:
            last = step.group(1) == step.group(2)
            if not last and self.last_step is not None and now - self.last_step < self.every_s:
                return
            self.last_step = now
        elif not HELD_OUT.match(text):
            return
        self.log(f"{self.prefix}{text} [{now - self.started:.0f} s into the cell]")


@contextmanager
def cell_progress(
    log: Callable[[str], None],
    prefix: str,
    every_s: float = STEP_EVERY_S,
    clock: Callable[[], float] = time.time,
) -> Iterator[None]:
    """Forward the cell's step and evaluation records to `log` while the block runs."""
    logger = logging.getLogger("teamrl")
    handler = _Forward(log, prefix, every_s, clock)
    level = logger.level
    if level == logging.NOTSET or level > logging.INFO:
        logger.setLevel(logging.INFO)  # the loop's INFO records reach the handler even outside a run's log
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
