"""Three instance splits (train / validation / test) that never share an instance's content.

A study picks its best checkpoint on the validation split and reports the test split, so the two
must be disjoint from each other and from training *by content* (two seeds can draw the same small
grid or the same operands). Every instance's content gets a bucket from a hash of its key; each
split owns a fixed range of buckets, so no content can land in two splits whatever the seeds.

The framework's rollout knows two split names, 'train' and 'heldout'; a task maps 'heldout' to the
validation or the test split by its `heldout_split` setting (validation while training, test for
the reported numbers).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from typing import TypeVar

SPLITS = ("train", "validation", "test")
"""The three splits, in bucket order."""
BUCKETS = 100
SHARES = {"train": (0, 70), "validation": (70, 85), "test": (85, 100)}
"""Each split's half-open bucket range: 70% / 15% / 15% of all contents."""

T = TypeVar("T")


def content_bucket(key: Hashable) -> int:
    """A stable bucket in [0, 100) for an instance's content (its `repr`, hashed with SHA-256)."""
    return int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "big") % BUCKETS


def content_split(key: Hashable) -> str:
    """The split that owns content `key`."""
    bucket = content_bucket(key)
    for name, (low, high) in SHARES.items():
        if low <= bucket < high:
            return name
    raise AssertionError(f"bucket {bucket} is in no split")  # the shares cover [0, 100)


def resolve_split(split: str, heldout_split: str) -> str:
    """The split a workflow's `split` argument means: 'train' is train, 'heldout' is `heldout_split`;
    'validation' and 'test' may also be named directly."""
    if split == "heldout":
        split = heldout_split
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use train, heldout, validation or test")
    return split


def check_heldout_split(task: str, value: str) -> None:
    """The `heldout_split` setting names validation or test, or a ValueError saying so."""
    if value not in ("validation", "test"):
        raise ValueError(
            f"{task}.heldout_split = {value!r} is invalid: use validation (pick checkpoints) or test "
            "(the reported numbers)"
        )


def draw_in_split(
    split: str, index: int, draw: Callable[[int], T], key: Callable[[T], Hashable], max_attempts: int = 10_000
) -> T:
    """Instance `index` of `split`: the first draw(seed) over seeds derived from (split, index) whose
    content belongs to `split` (rejection sampling; about 1 in 7 draws is kept for the small splits)."""
    if index < 0:
        raise ValueError(f"instance index must be >= 0, got {index}")
    for attempt in range(max_attempts):
        seed = int.from_bytes(hashlib.sha256(f"{split}/{index}/{attempt}".encode()).digest()[:6], "big")
        instance = draw(seed)
        if content_split(key(instance)) == split:
            return instance
    raise RuntimeError(
        f"no instance of split {split!r} in {max_attempts} draws: the generator's contents are "
        "too few; widen the task's settings"
    )
