"""Where the code team's problems come from: procedural function tasks, HumanEval or MBPP, split
into train and held-out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from teamrl.tasks.code_data import CodeProblem, load_humaneval, load_mbpp
from teamrl.tasks.code_procedural import procedural_code_problem
from teamrl.workflows.math_team import ProblemSplits, hash_partition


class CodeProblemSource(Protocol):
    """Anything that hands out problem `index` of a split ('train' / 'heldout')."""

    def get(self, split: str, index: int) -> CodeProblem: ...


@dataclass
class ProceduralSource:
    """`teamrl.tasks.code_procedural` tasks, optionally restricted to some families."""

    families: tuple[str, ...] | None = None
    seed: int = 0

    def get(self, split: str, index: int) -> CodeProblem:
        return procedural_code_problem(split, index, self.seed, self.families)


def code_problems(spec: str, seed: int = 0, data_dir: str | None = None) -> CodeProblemSource:
    """`procedural` / `procedural:add,mul` (families), `humaneval`, `mbpp` or `mbpp_sanitized`.

    MBPP keeps its published split (tasks 11-510 are the held-out test set, the rest train);
    HumanEval, which is a test set only, is split by a seeded hash of the task id (20% held out).
    """
    name, _, arg = spec.partition(":")
    if name == "procedural":
        return ProceduralSource(tuple(arg.split(",")) if arg else None, seed)
    if name == "humaneval":
        splits = hash_partition(
            load_humaneval(None if data_dir is None else f"{data_dir}/HumanEval.jsonl.gz"), lambda p: p.id, 0.2, seed
        )
        splits.name = "humaneval"
        return splits
    if name in ("mbpp", "mbpp_sanitized"):
        sanitized = name == "mbpp_sanitized"
        path = None if data_dir is None else f"{data_dir}/{'mbpp_sanitized' if sanitized else 'mbpp'}.jsonl"
        problems = load_mbpp(path, sanitized=sanitized)
        test = [p for p in problems if 11 <= int(p.id.split("/")[1]) <= 510]
        return ProblemSplits([p for p in problems if p not in test], test, name)
    raise ValueError(
        f"unknown code problem source {spec!r}: use procedural[:families], humaneval, mbpp or mbpp_sanitized"
    )
