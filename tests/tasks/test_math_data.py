"""Tests for teamrl.tasks.math_data: shared benchmark loaders, file formats, arithmetic generator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_sets import SUBSET_DIR, needs_full_data

from teamrl.tasks.base import HELD_OUT_SEED_OFFSET
from teamrl.tasks.math_data import (
    ArithmeticTask,
    DatasetFormatError,
    default_data_dir,
    generate_arithmetic,
    load_aime24,
    load_aime25,
    load_gsm8k,
    load_math500,
    load_math_dataset,
)


# --------------------------------------------------------------------------- shared benchmarks
# The first records of each set ship under tests/data; the full files' counts need the full files.


def test_gsm8k() -> None:
    test = load_gsm8k("test", SUBSET_DIR)
    assert len(test) == 5 and len(load_gsm8k("train", SUBSET_DIR)) == 5
    first = test[0]
    assert first.answer == "18" and first.id == "gsm8k-test-0" and first.source == "gsm8k-test"
    assert first.question.startswith("Janet") and "####" not in (first.solution or "")
    assert all("," not in p.answer and p.answer for p in test)


def test_math500() -> None:
    problems = load_math500(SUBSET_DIR)
    assert problems[0].id == "test/precalculus/807.json"
    assert problems[0].answer == r"\left( 3, \frac{\pi}{2} \right)"
    assert problems[0].metadata["subject"] == "Precalculus" and problems[0].metadata["level"] == 2
    assert all(p.solution for p in problems)


@needs_full_data("gsm8k_test.jsonl", "gsm8k_train.jsonl", "math500_test.jsonl")
def test_full_math_sets_have_every_record() -> None:
    assert (len(load_gsm8k("test")), len(load_gsm8k("train")), len(load_math500())) == (1319, 7473, 500)


@needs_full_data("aime24.jsonl", "aime25.jsonl")  # not shipped: their licence is not known
def test_aime() -> None:
    aime24, aime25 = load_aime24(), load_aime25()
    assert len(aime24) == 30 and len(aime25) == 30
    assert "25" in [p.answer for p in aime24]  # stored as "025" in the file
    assert all(p.answer == str(int(p.answer)) for p in aime24 + aime25)
    assert aime25[0].answer == "70"


def test_short_names_and_splits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMRL_DATA_DIR", str(SUBSET_DIR))
    assert len(load_math_dataset("GSM8K", split="train")) == 5
    assert len(load_math_dataset("math-500")) == 5
    with pytest.raises(ValueError, match="only a 'test' split"):
        load_math_dataset("aime24", split="train")
    with pytest.raises(ValueError, match="'train' or 'test'"):
        load_gsm8k("dev")


def test_env_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "aime25.jsonl").write_text(json.dumps({"problem": "1+1?", "answer": 2, "id": "0"}) + "\n")
    monkeypatch.setenv("TEAMRL_DATA_DIR", str(tmp_path))
    assert load_aime25()[0].answer == "2"
    with pytest.raises(FileNotFoundError, match="gsm8k_test.jsonl"):
        load_gsm8k()
    monkeypatch.setenv("TEAMRL_DATA_DIR", str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="TEAMRL_DATA_DIR"):
        default_data_dir()


# --------------------------------------------------------------------------- local files and errors


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_generic_jsonl(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "mine.jsonl",
        [
            json.dumps({"question": "2+2?", "answer": "4"}),
            "",
            json.dumps({"problem": "half of 3?", "solution": r"It is \boxed{\frac{3}{2}}.", "id": "x7"}),
            json.dumps({"prompt": "5 apples + 1?", "answer": "so 6\n#### 6"}),
            json.dumps({"question": "3*3?", "final_answer": 9}),
        ],
    )
    problems = load_math_dataset(path)
    assert [p.answer for p in problems] == ["4", r"\frac{3}{2}", "6", "9"]
    assert problems[1].id == "x7" and problems[0].source == "mine"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({"answer": "4"}), "missing field"),
        (json.dumps({"question": "2+2?"}), "no answer field"),
        (json.dumps({"question": "", "answer": "4"}), "non-empty"),
    ],
)
def test_malformed_record_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path / "bad.jsonl", [json.dumps({"question": "1+1?", "answer": "2"}), line])
    with pytest.raises(DatasetFormatError, match=rf"bad\.jsonl:2: .*{message}"):
        load_math_dataset(path)


def test_malformed_named_formats(tmp_path: Path) -> None:
    _write(tmp_path / "gsm8k_test.jsonl", [json.dumps({"question": "q", "answer": "no final value"})])
    with pytest.raises(DatasetFormatError, match=r"gsm8k_test\.jsonl:1: answer has no final value"):
        load_gsm8k("test", tmp_path)
    _write(tmp_path / "aime24.jsonl", [json.dumps({"problem": "q", "answer": "twelve"})])
    with pytest.raises(DatasetFormatError, match=r"aime24\.jsonl:1: AIME answer 'twelve'"):
        load_aime24(tmp_path)
    _write(tmp_path / "math500_test.jsonl", [""])
    with pytest.raises(DatasetFormatError, match="no records"):
        load_math500(tmp_path)


def test_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow not installed")
    import pyarrow.parquet as pq

    path = tmp_path / "set.parquet"
    pq.write_table(pa.table({"problem": ["1+2?"], "answer": ["3"]}), path)
    assert load_math_dataset(path)[0].answer == "3"


def test_unknown_names(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a known dataset"):
        load_math_dataset("gsm9k")
    with pytest.raises(ValueError, match="unsupported file type"):
        load_math_dataset(_write(tmp_path / "x.csv", ["a,b"]))


def test_hf_id_without_datasets_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ImportError, match="pip install datasets"):
        load_math_dataset("someone/some-math-set")


# --------------------------------------------------------------------------- arithmetic


def _value(expr: str) -> int:
    assert set(expr) <= set("0123456789+-*")
    return int(eval(expr))  # safe: only digits and + - *, checked above


@pytest.mark.parametrize("level", [1, 2, 3])
def test_arithmetic_answers_are_right(level: int) -> None:
    for problem in generate_arithmetic(level, 100, seed=3):
        assert int(problem.answer) == _value(problem.question) >= 0


def test_word_problems() -> None:
    problems = generate_arithmetic(4, 50, seed=1)
    assert all(p.question.endswith("?") and int(p.answer) >= 0 for p in problems)
    task = next(ArithmeticTask(4, s) for s in range(100) if "buys" in ArithmeticTask(4, s).question)
    numbers = [int(w) for w in task.question.split() if w.isdigit()]
    assert task.answer == sum(numbers)


def test_arithmetic_is_seeded() -> None:
    assert ArithmeticTask(2, 17) == ArithmeticTask(2, 17)
    assert generate_arithmetic(3, 20, seed=5) == generate_arithmetic(3, 20, seed=5)
    assert generate_arithmetic(3, 20, seed=5) != generate_arithmetic(3, 20, seed=6)
    assert ArithmeticTask(1, 0).question == "9-6" and ArithmeticTask(1, 0).answer == 3  # pinned across runs


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_train_and_heldout_are_disjoint(level: int) -> None:
    n_train = {1: 100, 2: 500, 3: 300, 4: 500}[level]
    train = generate_arithmetic(level, n_train, seed=0)
    held = generate_arithmetic(level, 20, seed=0, split="heldout")
    assert not {p.question for p in train} & {p.question for p in held}
    assert all(p.metadata["seed"] < HELD_OUT_SEED_OFFSET for p in train)
    assert all(p.metadata["seed"] >= HELD_OUT_SEED_OFFSET for p in held)
    assert len({p.question for p in train}) == len(train)


def test_arithmetic_errors() -> None:
    with pytest.raises(ValueError, match="level"):
        ArithmeticTask(5, 0)
    with pytest.raises(ValueError, match="split"):
        generate_arithmetic(1, 3, split="test")
    with pytest.raises(ValueError, match="could only generate"):
        generate_arithmetic(1, 1000)
    assert len(generate_arithmetic(1, 1000, unique=False)) == 1000
