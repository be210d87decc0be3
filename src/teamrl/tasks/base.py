"""The contract every task environment follows, and seeded train/held-out splits.

An environment knows nothing about models or tokens: it holds a task state, is reset from an
integer seed, and is stepped with an *action* (a task-specific Python value that a workflow has
already parsed out of model text). Copies for candidate scoring are made with `copy.deepcopy`, so
an environment must keep its whole state in plain attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

HELD_OUT_SEED_OFFSET = 1_000_000_000
"""Held-out instances use seeds from this offset up; training seeds stay below it."""


@dataclass
class StepResult:
    """What one `step` did to the environment.

    reward: the shaped team reward of this step (sum of its terms).
    terms: the named reward terms that add up to `reward` (e.g. step_cost, invalid, progress, goal).
    done: the episode is over (goal reached, invalid move, or budget spent).
    info: anything else a workflow may show the agents (e.g. where an invalid move happened).
    """

    reward: float
    done: bool
    terms: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Environment(Protocol):
    """A task instance an agent team acts on."""

    def reset(self, seed: int) -> None:
        """Build the instance for `seed` (the same seed always gives the same instance)."""

    def step(self, action: Any) -> StepResult:
        """Apply a parsed action to the state and return the shaped reward."""

    def render(self) -> str:
        """The current state as text, for prompts and transcripts."""

    @property
    def success(self) -> bool:
        """Whether the task is solved in the current state."""

    @property
    def done(self) -> bool:
        """Whether no further step is allowed."""


def split_seed(split: str, index: int) -> int:
    """The environment seed of instance `index` of a split ('train' or 'heldout').

    The two ranges never overlap; tasks whose instances can collide for different seeds (small
    grids) must additionally reject, in the training split, instances that are in the held-out set.
    """
    if index < 0:
        raise ValueError(f"instance index must be >= 0, got {index}")
    if split == "train":
        if index >= HELD_OUT_SEED_OFFSET:
            raise ValueError(f"training index {index} would run into the held-out seed range")
        return index
    if split == "heldout":
        return HELD_OUT_SEED_OFFSET + index
    raise ValueError(f"unknown split {split!r}: use 'train' or 'heldout'")


def check_puzzle_settings(config: Any, task: str) -> None:
    """The checks every generated puzzle's settings share (Sokoban, Sudoku): `max_steps` >= 0, the
    shaped reward's magnitudes >= 0, `heldout_instances` >= 0 and `max_attempts` >= 1."""
    if config.max_steps < 0:
        raise ValueError(f"{task}.max_steps must be >= 0, got {config.max_steps}")
    for name in ("step_cost", "invalid_penalty", "progress_coef", "goal_bonus"):
        value = getattr(config, name)
        if value < 0:
            raise ValueError(f"{task}.{name} must be >= 0 (it is a magnitude), got {value}")
    if config.heldout_instances < 0:
        raise ValueError(f"{task}.heldout_instances must be >= 0, got {config.heldout_instances}")
    if config.max_attempts < 1:
        raise ValueError(f"{task}.max_attempts must be >= 1, got {config.max_attempts}")
