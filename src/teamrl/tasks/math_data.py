"""Math problem sets: GSM8K, MATH-500, AIME 2024/2025, any JSONL/parquet/HF set, and a
procedural arithmetic generator small enough for a character-level model.

Benchmark files are read in place from the shared data directory (``TEAMRL_DATA_DIR``,
else ``../shared/datasets`` next to the repository); they are never copied. Every
answer is stored as a string in the form the checker compares against: GSM8K without
thousands separators, AIME as a plain integer (``"025"`` -> ``"25"``).
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrl.tasks.base import HELD_OUT_SEED_OFFSET, split_seed
from teamrl.tasks.datafiles import DatasetFormatError, default_data_dir, iter_jsonl
from teamrl.tasks.math_parsing import extract_boxed

__all__ = [
    "ArithmeticTask",
    "DatasetFormatError",
    "MathProblem",
    "default_data_dir",
    "generate_arithmetic",
    "load_aime24",
    "load_aime25",
    "load_gsm8k",
    "load_math500",
    "load_math_dataset",
]


@dataclass(frozen=True)
class MathProblem:
    """One math question with its reference answer.

    answer: the final answer as a string, ready for ``answers_match``.
    solution: worked solution text where the source has one.
    source: the dataset it came from (``gsm8k-test``, ``math500``, ``arithmetic-L2``...).
    metadata: extra fields of the source (subject, level, url...).
    """

    id: str
    question: str
    answer: str
    solution: str | None = None
    source: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- locating files


def _data_file(name: str, data_dir: str | os.PathLike[str] | None) -> Path:
    path = (Path(data_dir) if data_dir is not None else default_data_dir()) / name
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {path} does not exist")
    return path


def _field(record: Mapping[str, Any], names: tuple[str, ...], where: str, kind: type = str) -> Any:
    """The first present field among ``names``; a missing or mistyped one is an error at ``where``."""
    for name in names:
        if name in record and record[name] is not None:
            value = record[name]
            if kind is str and isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)
            if not isinstance(value, kind) or (kind is str and isinstance(value, str) and not value.strip()):
                raise DatasetFormatError(f"{where}: field {name!r} must be a non-empty {kind.__name__}, got {value!r}")
            return value
    raise DatasetFormatError(f"{where}: missing field {' / '.join(map(repr, names))} (has {sorted(record)})")


# --------------------------------------------------------------------------- record formats


def _gsm8k_answer(answer_text: str, where: str) -> tuple[str, str]:
    """(final answer, worked solution) from a GSM8K answer field."""
    reasoning, sep, final = answer_text.rpartition("####")
    final = final.strip().replace(",", "")
    if not sep or not final:
        raise DatasetFormatError(f"{where}: answer has no final value after '#### ': {answer_text[-80:]!r}")
    return final, reasoning.strip()


def _aime_answer(value: Any, where: str) -> str:
    try:
        return str(int(str(value).strip()))  # "025" and 25 both become "25"
    except ValueError:
        raise DatasetFormatError(f"{where}: AIME answer {value!r} is not an integer") from None


def _gsm8k_record(rec: Mapping[str, Any], index: int, where: str, source: str) -> MathProblem:
    answer, solution = _gsm8k_answer(_field(rec, ("answer",), where), where)
    return MathProblem(f"{source}-{index}", _field(rec, ("question",), where), answer, solution, source)


def _math500_record(rec: Mapping[str, Any], index: int, where: str, source: str) -> MathProblem:
    meta = {k: rec[k] for k in ("subject", "level") if k in rec}
    return MathProblem(
        str(rec.get("unique_id") or f"{source}-{index}"),
        _field(rec, ("problem",), where),
        _field(rec, ("answer",), where),
        rec.get("solution"),
        source,
        meta,
    )


def _aime_record(rec: Mapping[str, Any], index: int, where: str, source: str) -> MathProblem:
    meta = {"url": rec["url"]} if rec.get("url") else {}
    return MathProblem(
        f"{source}-{rec.get('id', index)}",
        _field(rec, ("problem", "question"), where),
        _aime_answer(_field(rec, ("answer",), where), where),
        rec.get("solution") or None,
        source,
        meta,
    )


def _generic_record(rec: Mapping[str, Any], index: int, where: str, source: str) -> MathProblem:
    """Best-effort mapping for other sets: question/problem/prompt and answer/final_answer/solution."""
    question = _field(rec, ("question", "problem", "prompt", "input"), where)
    solution = rec.get("solution") if isinstance(rec.get("solution"), str) else None
    raw = next((rec[k] for k in ("answer", "final_answer", "target") if rec.get(k) is not None), None)
    if raw is None and solution is not None:
        raw = extract_boxed(solution)
    if raw is None or not str(raw).strip():
        raise DatasetFormatError(
            f"{where}: no answer field (answer / final_answer / target) and no \\boxed{{}} in a "
            'solution; give every record its final answer, e.g. "answer": "42"'
        )
    answer = str(raw)
    if "####" in answer:
        answer, gsm_solution = _gsm8k_answer(answer, where)
        solution = solution or gsm_solution
    record_id = next((rec[k] for k in ("id", "unique_id", "problem_id", "task_id") if rec.get(k) is not None), index)
    return MathProblem(str(record_id), question, answer.strip(), solution, source)


RecordParser = Callable[[Mapping[str, Any], int, str, str], MathProblem]


def _load_jsonl(path: Path, parse: RecordParser, source: str) -> list[MathProblem]:
    problems = [parse(rec, i, f"{path}:{lineno}", source) for i, (lineno, rec) in enumerate(iter_jsonl(path))]
    if not problems:
        raise DatasetFormatError(
            f"{path}: no records (the file is empty or blank); write one JSON object per "
            "line with a question and its answer"
        )
    return problems


# --------------------------------------------------------------------------- named loaders


def load_gsm8k(split: str = "test", data_dir: str | os.PathLike[str] | None = None) -> list[MathProblem]:
    """GSM8K ``train`` (7473) or ``test`` (1319); the answer is the value after ``#### ``."""
    if split not in ("train", "test"):
        raise ValueError(f"GSM8K split must be 'train' or 'test', got {split!r}")
    return _load_jsonl(_data_file(f"gsm8k_{split}.jsonl", data_dir), _gsm8k_record, f"gsm8k-{split}")


def load_math500(data_dir: str | os.PathLike[str] | None = None) -> list[MathProblem]:
    """MATH-500 (test only); ``id`` is the source's ``unique_id``, subject/level in metadata."""
    return _load_jsonl(_data_file("math500_test.jsonl", data_dir), _math500_record, "math500")


def load_aime24(data_dir: str | os.PathLike[str] | None = None) -> list[MathProblem]:
    """AIME 2024 I and II (30 problems); answers as plain integers."""
    return _load_jsonl(_data_file("aime24.jsonl", data_dir), _aime_record, "aime24")


def load_aime25(data_dir: str | os.PathLike[str] | None = None) -> list[MathProblem]:
    """AIME 2025 I and II (30 problems); answers as plain integers."""
    return _load_jsonl(_data_file("aime25.jsonl", data_dir), _aime_record, "aime25")


_TEST_ONLY: dict[str, Callable[[str | os.PathLike[str] | None], list[MathProblem]]] = {
    "math500": load_math500,
    "aime24": load_aime24,
    "aime25": load_aime25,
}


def _load_parquet(path: Path) -> list[MathProblem]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(f"reading {path} needs pyarrow: pip install pyarrow") from exc
    rows = pq.read_table(path).to_pylist()
    if not rows:
        raise DatasetFormatError(f"{path}: no records")
    return [_generic_record(rec, i, f"{path}: row {i}", path.stem) for i, rec in enumerate(rows)]


def _load_hf(name: str, split: str) -> list[MathProblem]:
    try:
        import datasets
    except ImportError as exc:
        raise ImportError(
            f"loading Hugging Face dataset {name!r} needs the datasets package: pip install datasets"
        ) from exc
    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as exc:  # network, auth, missing split: all surface as one clear error
        raise RuntimeError(
            f"could not load Hugging Face dataset {name!r} split {split!r} (offline, unknown id or split?): {exc}"
        ) from exc
    return [_generic_record(rec, i, f"{name}[{split}] row {i}", name) for i, rec in enumerate(ds)]


def load_math_dataset(
    name_or_path: str | os.PathLike[str],
    split: str = "test",
    data_dir: str | os.PathLike[str] | None = None,
) -> list[MathProblem]:
    """Load math problems by short name, local file or Hugging Face id.

    * ``gsm8k`` (split ``train``/``test``), ``math500``, ``aime24``, ``aime25``
      (``test`` only) from the shared data directory;
    * an existing ``.jsonl``/``.json`` (JSON lines) or ``.parquet`` file; ``split``
      is ignored. Records need a question (``question``/``problem``/``prompt``)
      and an answer (``answer``/``final_answer``/``target``, or a ``\\boxed{}`` in
      ``solution``); a GSM8K-style ``#### x`` answer is reduced to ``x``;
    * otherwise an ``owner/name`` Hugging Face dataset id, through the optional
      ``datasets`` package (imported only here).
    """
    key = str(name_or_path)
    short = key.lower().replace("-", "").replace("_", "")
    if short == "gsm8k":
        return load_gsm8k(split, data_dir)
    if short in _TEST_ONLY:
        if split != "test":
            raise ValueError(f"{key} has only a 'test' split, got {split!r}")
        return _TEST_ONLY[short](data_dir)
    path = Path(key).expanduser()
    if path.is_file():
        if path.suffix == ".parquet":
            return _load_parquet(path)
        if path.suffix in (".jsonl", ".json"):
            return _load_jsonl(path, _generic_record, path.stem)
        raise ValueError(f"{path}: unsupported file type {path.suffix!r} (use .jsonl or .parquet)")
    if "/" in key and not path.exists() and not key.startswith((".", "/", "~")):
        return _load_hf(key, split)
    raise FileNotFoundError(
        f"{key!r} is not a known dataset (gsm8k, math500, aime24, aime25), an existing file, or a Hugging Face id"
    )


# --------------------------------------------------------------------------- arithmetic generator

ARITHMETIC_LEVELS = (1, 2, 3, 4)
# About one question in five belongs to the held-out set, decided by the question text
# itself so that no seed of either split can produce a question of the other.
_HELD_OUT_BUCKETS = 5

_NAMES = ("Tom", "Ann", "Sam", "Mia", "Ben", "Lily", "Max", "Zoe")
_ITEMS = ("apples", "pens", "cards", "eggs", "books", "coins", "shells", "cups")


def _word_problem(rng: random.Random) -> tuple[str, int]:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    kind = rng.randrange(4)
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    if kind == 0:
        return f"{name} has {a} {item} and buys {b} more. How many {item} does {name} have?", a + b
    if kind == 1:
        a, b = max(a, b), min(a, b)
        return f"{name} has {a} {item} and gives away {b}. How many {item} are left?", a - b
    if kind == 2:
        return f"{name} has {a} bags with {b} {item} in each. How many {item} in all?", a * b
    c = rng.randint(1, 9)
    a, b = max(a, b), min(a, b)
    return f"{name} had {a} {item}, lost {b} and found {c}. How many {item} now?", a - b + c


def _make_question(level: int, rng: random.Random) -> tuple[str, int]:
    if level == 1:
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        if rng.random() < 0.5:
            return f"{a}+{b}", a + b
        a, b = max(a, b), min(a, b)  # no negative answers at the first level
        return f"{a}-{b}", a - b
    if level == 2:
        a, b, c = rng.randint(1, 20), rng.randint(1, 9), rng.randint(1, 9)
        op1, op2 = rng.choice("+-"), rng.choice("+-")
        if op1 == "-" and b > a:
            a, b = b, a
        value = a + b if op1 == "+" else a - b
        if op2 == "-" and c > value:
            op2 = "+"  # keep every intermediate and final value non-negative
        value = value + c if op2 == "+" else value - c
        return f"{a}{op1}{b}{op2}{c}", value
    if level == 3:
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        if rng.random() < 0.5:
            return f"{a}*{b}", a * b
        # Times tables alone give only 121 questions, too few for a held-out split.
        c = rng.randint(1, 9)
        return f"{a}*{b}+{c}", a * b + c
    return _word_problem(rng)


@dataclass(frozen=True)
class ArithmeticTask:
    """One generated problem, fully determined by ``level`` (1-4) and ``seed``.

    Level 1: ``3+4`` / ``7-2``; level 2: ``12-5+3``; level 3: ``7*8`` or
    ``7*8+3``; level 4: one-sentence word problems ("Tom has 3 apples and buys
    4 more..."). Answers are non-negative integers.
    """

    level: int
    seed: int
    question: str = field(init=False)
    answer: int = field(init=False)

    def __post_init__(self) -> None:
        if self.level not in ARITHMETIC_LEVELS:
            raise ValueError(f"arithmetic level must be one of {ARITHMETIC_LEVELS}, got {self.level!r}")
        # A string seed goes through SHA-512 in random.Random: stable across runs and platforms.
        question, answer = _make_question(self.level, random.Random(f"teamrl-arith:{self.level}:{self.seed}"))
        object.__setattr__(self, "question", question)
        object.__setattr__(self, "answer", answer)

    @property
    def in_held_out_set(self) -> bool:
        """Whether this question belongs to the held-out side of the content partition."""
        digest = hashlib.sha256(f"{self.level}|{self.question}".encode()).digest()
        return digest[0] % _HELD_OUT_BUCKETS == 0

    def to_problem(self) -> MathProblem:
        split = "heldout" if self.seed >= HELD_OUT_SEED_OFFSET else "train"
        return MathProblem(
            id=f"arith-L{self.level}-{self.seed}",
            question=self.question,
            answer=str(self.answer),
            source=f"arithmetic-L{self.level}",
            metadata={"level": self.level, "seed": self.seed, "split": split},
        )


def generate_arithmetic(
    level: int, n: int, seed: int = 0, split: str = "train", unique: bool = True
) -> list[MathProblem]:
    """``n`` arithmetic problems of ``level`` for ``split`` (``train`` or ``heldout``).

    Instance seeds come from the split's own range (see ``teamrl.tasks.base.split_seed``),
    drawn by a generator seeded with ``seed``. Because small levels have few distinct
    questions, the splits are also kept disjoint by content: a question belongs to the
    held-out set by a hash of its text, and each split rejects the other's questions.
    With ``unique`` (default) repeated questions are rejected too; asking for more
    than a level can produce raises ``ValueError``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    want_held_out = {"train": False, "heldout": True}.get(split)
    if want_held_out is None:
        raise ValueError(f"unknown split {split!r}: use 'train' or 'heldout'")
    rng = random.Random(f"teamrl-arith-stream:{split}:{level}:{seed}")
    problems: list[MathProblem] = []
    seen: set[str] = set()
    misses = 0
    while len(problems) < n:
        # Give up after a long run of rejections: the level's question space is used up.
        if misses > 2000 + 20 * len(problems):
            raise ValueError(
                f"could only generate {len(problems)} of {n} {'unique ' if unique else ''}level-{level} "
                f"problems for split {split!r}; ask for fewer or pass unique=False"
            )
        task = ArithmeticTask(level, split_seed(split, rng.randrange(HELD_OUT_SEED_OFFSET)))
        if task.in_held_out_set != want_held_out or (unique and task.question in seen):
            misses += 1
            continue
        misses = 0
        seen.add(task.question)
        problems.append(task.to_problem())
    return problems
