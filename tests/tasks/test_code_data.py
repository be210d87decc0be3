"""Code dataset loaders: real HumanEval/MBPP records (a few shipped under tests/data, the full files'
counts when they are found) and hand-written APPS / CodeContests / LiveCodeBench records in their
published formats."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest
from data_sets import SUBSET_DIR, needs_full_data

from teamrl.sandbox import Sandbox, SandboxLimits
from teamrl.tasks.code_data import (
    CodeProblem, DataFormatError, IOTest, default_data_dir, load_apps, load_code_contests, load_humaneval,
    load_livecodebench, load_mbpp,
)


@pytest.fixture
def subset(monkeypatch) -> Path:
    """The few records of each set shipped under tests/data, as the data directory."""
    monkeypatch.setenv("TEAMRL_DATA_DIR", str(SUBSET_DIR))
    return SUBSET_DIR


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def box():
    with Sandbox(SandboxLimits(wall_time_s=5.0), workers=2) as sandbox:
        yield sandbox


def test_humaneval_loads_and_first_problem_grades(box, subset):
    problems = load_humaneval()
    assert [p.id for p in problems] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    first = problems[0]
    assert first.id == "HumanEval/0" and first.entry_point == "has_close_elements"
    assert first.reference_solution.startswith(first.prompt) and "def check(candidate)" in first.tests
    res = box.run_tests(first.reference_solution, first.tests, first.entry_point, setup=first.test_setup)
    assert res.all_passed and res.total >= 5


def test_mbpp_full_and_sanitized(subset):
    full, sanitized = load_mbpp(), load_mbpp(sanitized=True)
    by_id = {p.id: p for p in full}
    assert by_id["mbpp/126"].entry_point == "sum"  # a reference that shadows a builtin
    assert by_id["mbpp/1"].tests.count("assert") == 3
    assert "Your code should pass tests like this:\nassert min_cost(" in by_id["mbpp/1"].prompt
    assert any(p.test_setup == "import math" for p in sanitized)


@needs_full_data("HumanEval.jsonl.gz", "mbpp.jsonl", "mbpp_sanitized.jsonl")
def test_full_code_sets_have_every_record():
    humaneval, full, sanitized = load_humaneval(), load_mbpp(), load_mbpp(sanitized=True)
    assert len(humaneval) == 164 and len({p.id for p in humaneval}) == 164
    assert (len(full), len(sanitized)) == (974, 427)


def test_default_data_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("TEAMRL_DATA_DIR", str(tmp_path))
    assert default_data_dir() == tmp_path
    with pytest.raises(FileNotFoundError, match="HumanEval.jsonl.gz"):
        load_humaneval()


def test_missing_file_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="data file not found"):
        load_mbpp(tmp_path / "nope.jsonl")


def test_malformed_records_name_the_line(tmp_path):
    bad_json = tmp_path / "bad.jsonl"
    good = {"task_id": 1, "text": "t", "code": "def f():\n    return 1", "test_list": ["assert f() == 1"]}
    bad_json.write_text(json.dumps(good) + '\n{not json\n')
    with pytest.raises(DataFormatError, match=r"bad.jsonl:2: not valid JSON"):
        load_mbpp(bad_json)
    missing = write_jsonl(tmp_path / "missing.jsonl", [{"task_id": "HumanEval/0", "prompt": "x"}])
    with pytest.raises(DataFormatError, match=r"missing.jsonl:1: missing field 'canonical_solution'"):
        load_humaneval(missing)
    wrong_type = write_jsonl(tmp_path / "wrong.jsonl", [
        {"task_id": 1, "text": "t", "code": "c", "test_list": "assert f()"}])
    with pytest.raises(DataFormatError, match=r"wrong.jsonl:1: field 'test_list' should be list"):
        load_mbpp(wrong_type)
    not_object = tmp_path / "list.jsonl"
    not_object.write_text("[1, 2]\n")
    with pytest.raises(DataFormatError, match="expected a JSON object"):
        load_mbpp(not_object)


APPS_RECORDS = [
    {"problem_id": 1, "question": "Read two ints, print their sum.", "difficulty": "introductory",
     "url": "u", "starter_code": "",
     "solutions": json.dumps(["a, b = map(int, input().split())\nprint(a + b)\n"]),
     "input_output": json.dumps({"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]})},
    {"problem_id": 2, "question": "Return the doubled list.", "difficulty": "interview", "url": "u",
     "starter_code": "def double(xs):\n",
     "solutions": json.dumps(["def double(xs):\n    return [2 * x for x in xs]\n"]),
     "input_output": json.dumps({"fn_name": "double", "inputs": [[[1, 2]], [[]]], "outputs": [[[2, 4]], [[]]]})},
    {"problem_id": 3, "question": "LeetCode style.", "difficulty": "interview", "url": "u",
     "starter_code": "class Solution:\n    def twoMax(self, a: int, b: int) -> int:\n",
     "solutions": json.dumps(["class Solution:\n    def twoMax(self, a, b):\n        return max(a, b)\n"]),
     "input_output": json.dumps({"fn_name": "twoMax", "inputs": [[1, 5], [7, 2]], "outputs": [5, 7]})},
]


def test_apps_records_load_and_grade(tmp_path, box):
    problems = load_apps(write_jsonl(tmp_path / "apps.jsonl", APPS_RECORDS))
    stdin_p, call_p, class_p = problems
    assert stdin_p.io_tests == [IOTest("1 2\n", "3\n"), IOTest("10 -3\n", "7\n")] and stdin_p.tests == ""
    assert box.run_io_tests(stdin_p.reference_solution, stdin_p.io_tests).all_passed
    assert box.run_io_tests("print(0)", stdin_p.io_tests).passed == 0
    assert call_p.entry_point == "double" and call_p.io_tests == []
    for problem in (call_p, class_p):
        res = box.run_tests(problem.reference_solution, problem.tests, problem.entry_point, setup=problem.test_setup)
        assert res.all_passed and res.total == 2, res
    wrong = box.run_tests("class Solution:\n    def twoMax(self, a, b):\n        return min(a, b)\n", class_p.tests,
                          class_p.entry_point, setup=class_p.test_setup)
    assert (wrong.passed, wrong.total) == (0, 2)


def test_apps_mismatched_io_lists(tmp_path):
    bad = dict(APPS_RECORDS[0], input_output=json.dumps({"inputs": ["1"], "outputs": []}))
    with pytest.raises(DataFormatError, match=r"apps.jsonl:1: input_output needs equal-length"):
        load_apps(write_jsonl(tmp_path / "apps.jsonl", [bad]))


def test_code_contests_record(tmp_path, box):
    record = {
        "name": "1000_A. Sum", "description": "Print a+b.", "source": 2, "difficulty": 7,
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["5 5\n"], "output": ["10\n"]},
        "generated_tests": {"input": ["0 0\n"], "output": ["0\n"]},
        "solutions": {"language": [2, 3], "solution": ["int main(){}", "print(sum(map(int, input().split())))"]},
        "time_limit": {"seconds": 2, "nanos": 0}, "memory_limit_bytes": 256000000,
    }
    (problem,) = load_code_contests(write_jsonl(tmp_path / "cc.jsonl", [record]))
    assert problem.id == "code_contests/1000_A. Sum" and len(problem.io_tests) == 2
    assert problem.reference_solution.startswith("print(")  # the Python 3 one, not the C++ one
    assert box.run_io_tests(problem.reference_solution, problem.io_tests).all_passed
    (with_generated,) = load_code_contests(tmp_path / "cc.jsonl", include_generated=True)
    assert len(with_generated.io_tests) == 3


def _lcb_compress(cases: list[dict]) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


def test_livecodebench_records(tmp_path, box):
    stdin_record = {
        "question_id": "abc001_a", "question_title": "Sum", "question_content": "Print a+b.", "platform": "atcoder",
        "starter_code": "", "difficulty": "easy", "contest_date": "2024-01-01", "metadata": "{}",
        "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
        "private_test_cases": _lcb_compress([{"input": "2 2\n", "output": "4\n", "testtype": "stdin"}]),
    }
    functional = {
        "question_id": "3000", "question_title": "Max", "question_content": "Return the max.", "platform": "leetcode",
        "starter_code": "class Solution:\n    def maxOf(self, nums: List[int], k: int) -> int:\n",
        "difficulty": "easy", "contest_date": "2024-01-01", "metadata": json.dumps({"func_name": "maxOf"}),
        "public_test_cases": json.dumps([{"input": "[1, 5, 2]\n1", "output": "5", "testtype": "functional"}]),
        "private_test_cases": _lcb_compress([{"input": "[7]\n0", "output": "7", "testtype": "functional"}]),
    }
    stdin_p, func_p = load_livecodebench(write_jsonl(tmp_path / "lcb.jsonl", [stdin_record, functional]))
    assert [t.input for t in stdin_p.io_tests] == ["1 2\n", "2 2\n"]
    assert box.run_io_tests("print(sum(map(int, input().split())))", stdin_p.io_tests).all_passed
    assert func_p.entry_point == "maxOf" and func_p.tests.count("assert") == 2
    good = "class Solution:\n    def maxOf(self, nums, k):\n        return max(nums)\n"
    assert box.run_tests(good, func_p.tests, func_p.entry_point, setup=func_p.test_setup).all_passed


def test_livecodebench_refuses_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))
    record = {"question_id": "x", "question_content": "q",
              "public_test_cases": "[]", "private_test_cases": base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()}
    with pytest.raises(DataFormatError, match="refusing to load builtins.print"):
        load_livecodebench(write_jsonl(tmp_path / "lcb.jsonl", [record]))


def test_code_problem_fields():
    problem = CodeProblem(id="x", prompt="p", reference_solution="", tests="assert f()", entry_point="f",
                          test_setup="import math")
    assert problem.test_imports == "import math" and problem.io_tests == [] and problem.metadata == {}
