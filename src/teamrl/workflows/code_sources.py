"""Where the code team's problems come from: procedural function tasks, HumanEval or MBPP, split
into train and held-out."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from teamrl.tasks.code_data import CodeProblem, load_humaneval, load_mbpp
from teamrl.tasks.code_procedural import procedural_code_problem
from teamrl.tasks.content_splits import BUCKETS, check_heldout_split, content_bucket
from teamrl.workflows.math_team import ProblemSplits, hash_partition


class CodeProblemSource(Protocol):
    """Anything that hands out problem `index` of a split ('train' / 'heldout')."""

    def get(self, split: str, index: int) -> CodeProblem: ...


@dataclass
class ProceduralSource:
    """`teamrl.tasks.code_procedural` tasks, optionally restricted to some families.

    heldout_split: what 'heldout' means. '' is the whole held-out stream; 'validation' and 'test' are its two
    halves by content: a held-out instance belongs to one half by a hash of its task and its asserts, so no
    problem (the same function and the same checks) is in both, whatever their indices."""

    families: tuple[str, ...] | None = None
    seed: int = 0
    heldout_split: str = ""
    _halves: dict[str, list[int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.heldout_split:
            check_heldout_split("code", self.heldout_split)

    def get(self, split: str, index: int) -> CodeProblem:
        if split == "heldout" and self.heldout_split:
            split = self.heldout_split
        if split not in ("validation", "test"):
            return procedural_code_problem(split, index, self.seed, self.families)
        if index < 0:
            raise ValueError(f"instance index must be >= 0, got {index}")
        half = self._halves.setdefault(split, [])
        scanned = sum(len(h) for h in self._halves.values())  # held-out instances 0..scanned-1 are assigned
        while len(half) <= index:
            problem = procedural_code_problem("heldout", scanned, self.seed, self.families)
            owner = "validation" if content_bucket((problem.metadata["spec"], problem.tests)) < BUCKETS // 2 else "test"
            self._halves.setdefault(owner, []).append(scanned)
            scanned += 1
        return procedural_code_problem("heldout", half[index], self.seed, self.families)


def code_problems(spec: str, seed: int = 0, data_dir: str | None = None, heldout_split: str = "") -> CodeProblemSource:
    """`procedural` / `procedural:add,mul` (families; `procedural:lists` the harder level), `humaneval`,
    `mbpp` or `mbpp_sanitized`.

    MBPP keeps its published split (tasks 11-510 are the held-out test set, the rest train);
    HumanEval, which is a test set only, is split by a seeded hash of the task id (20% held out).
    heldout_split: '' (held-out is the whole held-out set) or 'validation' / 'test', one half of it that
    shares no problem with the other (a study picks checkpoints on one and reports the other).
    """
    name, _, arg = spec.partition(":")
    if name == "procedural":
        return ProceduralSource(tuple(arg.split(",")) if arg else None, seed, heldout_split)
    if name == "humaneval":
        splits = hash_partition(
            load_humaneval(None if data_dir is None else f"{data_dir}/HumanEval.jsonl.gz"), lambda p: p.id, 0.2, seed
        )
        return replace(splits, name="humaneval", heldout_split=heldout_split)
    if name in ("mbpp", "mbpp_sanitized"):
        sanitized = name == "mbpp_sanitized"
        path = None if data_dir is None else f"{data_dir}/{'mbpp_sanitized' if sanitized else 'mbpp'}.jsonl"
        problems = load_mbpp(path, sanitized=sanitized)
        test = [p for p in problems if 11 <= int(p.id.split("/")[1]) <= 510]
        return ProblemSplits([p for p in problems if p not in test], test, name, heldout_split)
    raise ValueError(
        f"unknown code problem source {spec!r}: use procedural[:families], humaneval, mbpp or mbpp_sanitized"
    )
