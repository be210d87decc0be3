"""Loaders for code-generation benchmarks: HumanEval, MBPP, APPS, CodeContests, LiveCodeBench.

Every loader returns `CodeProblem`s that `teamrl.sandbox.Sandbox` can grade directly:

* function-level problems (HumanEval, MBPP, call-based APPS / LiveCodeBench) carry `tests` for
  `Sandbox.run_tests(program, problem.tests, problem.entry_point, setup=problem.test_setup)`;
* stdin/stdout problems (APPS, CodeContests, LiveCodeBench) carry `io_tests` for
  `Sandbox.run_io_tests(program, problem.io_tests)`.

Files are read in their published JSON-lines formats (optionally gzip-compressed). A malformed
record raises `DataFormatError` naming the file, the line and what is wrong.
"""

from __future__ import annotations

import ast
import base64
import builtins
import io
import json
import os
import pickle
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrl.tasks.datafiles import DATA_DIR_ENV, DatasetFormatError, default_data_dir, iter_jsonl

DataFormatError = DatasetFormatError
"""The error a malformed code data file raises (one class for every loader; this name is kept)."""


@dataclass
class IOTest:
    """One stdin/stdout test case: feed `input`, expect `output` (compared token-wise)."""

    input: str
    output: str


@dataclass
class CodeProblem:
    """A code-generation problem with its ground-truth tests.

    id: dataset-qualified id, e.g. "HumanEval/0", "mbpp/11", "apps/4000".
    prompt: what the model is shown (for HumanEval the function signature and docstring).
    reference_solution: a complete program that passes the tests ("" when the data has none).
    tests: test code for `Sandbox.run_tests` ("" for stdin/stdout problems).
    entry_point: the function under test (HumanEval `check(candidate)` gets it), or None.
    test_setup: trusted code run with the tests (imports, MBPP setup code, or the HumanEval
        prompt so that the tests use its real helper functions rather than the program's).
    io_tests: stdin/stdout cases for `Sandbox.run_io_tests` (empty for function-level problems).
    source: dataset name ("humaneval", "mbpp", "mbpp_sanitized", "apps", "code_contests", "livecodebench").
    metadata: anything else from the record (difficulty, extra test lists, urls, ...).
    """

    id: str
    prompt: str
    reference_solution: str
    tests: str
    entry_point: str | None
    test_setup: str = ""
    io_tests: list[IOTest] = field(default_factory=list)
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def test_imports(self) -> str:
        """Alias of `test_setup` (the MBPP field name)."""
        return self.test_setup


# ----------------------------------------------------------------------------- files


def _resolve(path: str | os.PathLike[str] | None, default_name: str) -> Path:
    resolved = Path(path) if path is not None else default_data_dir() / default_name
    if not resolved.is_file():
        hint = "" if path is not None else f" (set {DATA_DIR_ENV} to the directory holding {default_name})"
        raise FileNotFoundError(f"data file not found: {resolved}{hint}")
    return resolved


class _Record:
    """Typed field access with errors that say where the bad record is."""

    def __init__(self, path: Path, lineno: int, record: dict[str, Any]):
        self.where, self.record = f"{path}:{lineno}", record

    def fail(self, message: str) -> DataFormatError:
        return DataFormatError(f"{self.where}: {message}")

    def get(self, name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        if name not in self.record or self.record[name] is None:
            if default is ...:
                raise self.fail(f"missing field {name!r}")
            return default
        value = self.record[name]
        if not isinstance(value, kind):
            expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(f"field {name!r} should be {expected}, got {type(value).__name__}")
        return value

    def str_list(self, name: str, default: Any = ...) -> list[str]:
        value = self.get(name, list, default)
        if not all(isinstance(x, str) for x in value):
            raise self.fail(f"field {name!r} should be a list of strings")
        return value

    def json_field(self, name: str, default: Any = ...) -> Any:
        """A field that may hold JSON data directly or as a JSON-encoded string."""
        value = self.get(name, (str, list, dict), default)
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None if default is ... else default
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise self.fail(f"field {name!r} is not valid JSON: {exc.msg}") from None


# ----------------------------------------------------------------------------- HumanEval / MBPP


def load_humaneval(path: str | os.PathLike[str] | None = None) -> list[CodeProblem]:
    """HumanEval (`HumanEval.jsonl.gz` or `.jsonl`): 164 problems with `check(candidate)` tests."""
    resolved = _resolve(path, "HumanEval.jsonl.gz")
    problems = []
    for lineno, raw in iter_jsonl(resolved):
        rec = _Record(resolved, lineno, raw)
        prompt, solution = rec.get("prompt", str), rec.get("canonical_solution", str)
        entry_point = rec.get("entry_point", str)
        if not entry_point.isidentifier():
            raise rec.fail(f"entry_point {entry_point!r} is not an identifier")
        problems.append(
            CodeProblem(
                id=rec.get("task_id", str),
                prompt=prompt,
                reference_solution=prompt + solution,
                tests=rec.get("test", str),
                entry_point=entry_point,
                test_setup=prompt,
                source="humaneval",
            )
        )
    return problems


def _called_function(test: str, reference: str = "") -> str | None:
    """MBPP's function under test: the first function an assert line calls that the reference
    solution defines (even if it shadows a builtin, like MBPP's `sum`), else the first
    non-builtin one."""
    with warnings.catch_warnings():  # old MBPP code has invalid escapes like "\d" in plain strings
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        try:
            calls = [
                n.func.id for n in ast.walk(ast.parse(test)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            ]
        except SyntaxError:
            return None
        try:
            defined = {
                n.name
                for n in ast.walk(ast.parse(reference))
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            }
        except SyntaxError:
            defined = set()
    for name in calls:
        if name in defined:
            return name
    return next((name for name in calls if name not in builtins.__dict__), None)


def load_mbpp(path: str | os.PathLike[str] | None = None, sanitized: bool = False) -> list[CodeProblem]:
    """MBPP: `mbpp.jsonl` (974 problems) or, with sanitized=True, `mbpp_sanitized.jsonl` (427).

    The prompt is the task text plus the first test assert (as in the MBPP paper's prompts, so
    the model knows the function name and signature); `tests` holds every assert of test_list.
    The full file's `challenge_test_list` is kept in metadata["challenge_tests"].
    """
    resolved = _resolve(path, "mbpp_sanitized.jsonl" if sanitized else "mbpp.jsonl")
    problems = []
    for lineno, raw in iter_jsonl(resolved):
        rec = _Record(resolved, lineno, raw)
        task_id = rec.get("task_id", (int, str))
        tests = rec.str_list("test_list")
        if not tests:
            raise rec.fail("test_list is empty")
        if sanitized:
            text = rec.get("prompt", str)
            setup = "\n".join(rec.str_list("test_imports", []))
            metadata: dict[str, Any] = {"source_file": rec.get("source_file", str, "")}
        else:
            text = rec.get("text", str)
            setup = rec.get("test_setup_code", str, "")
            metadata = {"challenge_tests": "\n".join(rec.str_list("challenge_test_list", []))}
        problems.append(
            CodeProblem(
                id=f"mbpp/{task_id}",
                prompt=f"{text}\nYour code should pass tests like this:\n{tests[0]}",
                reference_solution=rec.get("code", str),
                tests="\n".join(tests),
                entry_point=_called_function(tests[0], rec.get("code", str)),
                test_setup=setup,
                source="mbpp_sanitized" if sanitized else "mbpp",
                metadata=metadata,
            )
        )
    return problems


# ----------------------------------------------------------------------------- stdin/stdout sets


# Checks a call-based result the way the APPS harness does: tuples compare as lists, and an
# expected value wrapped in a one-element list also matches the bare value.
_CALL_MATCH_SETUP = """
def __teamrl_matches__(result, expected):
    if isinstance(result, tuple):
        result = list(result)
    return result == expected or (isinstance(expected, list) and len(expected) == 1 and result == expected[0])
"""


def _call_based_tests(fn_name: str, cases: list[tuple[list[Any], Any]], uses_class: bool) -> str:
    """Assert lines calling `fn_name` (or `Solution().fn_name`) with JSON-decoded arguments."""
    call = f"Solution().{fn_name}" if uses_class else fn_name
    return "\n".join(f"assert __teamrl_matches__({call}(*{args!r}), {expected!r})" for args, expected in cases)


def load_apps(path: str | os.PathLike[str]) -> list[CodeProblem]:
    """APPS JSON lines (fields problem_id, question, solutions, input_output, difficulty, url,
    starter_code; `solutions` and `input_output` are JSON strings). Problems whose input_output
    has `fn_name` are call-based (tests for run_tests); the rest are stdin/stdout."""
    resolved = _resolve(path, "apps.jsonl")
    problems = []
    for lineno, raw in iter_jsonl(resolved):
        rec = _Record(resolved, lineno, raw)
        io_spec = rec.json_field("input_output", {}) or {}
        if not isinstance(io_spec, dict):
            raise rec.fail("input_output should be a JSON object with 'inputs' and 'outputs'")
        inputs, outputs = io_spec.get("inputs", []), io_spec.get("outputs", [])
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise rec.fail(
                f"input_output needs equal-length 'inputs' and 'outputs' lists "
                f"(got {len(inputs) if isinstance(inputs, list) else '?'} and "
                f"{len(outputs) if isinstance(outputs, list) else '?'})"
            )
        solutions = rec.json_field("solutions", []) or []
        starter = rec.get("starter_code", str, "")
        fn_name = io_spec.get("fn_name")
        tests, io_tests, setup = "", [], ""
        if fn_name:
            if not (isinstance(fn_name, str) and fn_name.isidentifier()):
                raise rec.fail(f"fn_name {fn_name!r} is not an identifier")
            cases = [(args if isinstance(args, list) else [args], out) for args, out in zip(inputs, outputs)]
            tests, setup = _call_based_tests(fn_name, cases, "class Solution" in starter), _CALL_MATCH_SETUP
        else:
            io_tests = [IOTest(_as_text(i), _as_text(o)) for i, o in zip(inputs, outputs)]
        problem_id = rec.get("problem_id", (int, str))
        problems.append(
            CodeProblem(
                id=f"apps/{problem_id}",
                prompt=rec.get("question", str) + (f"\n{starter}" if starter else ""),
                reference_solution=solutions[0] if solutions and isinstance(solutions[0], str) else "",
                tests=tests,
                entry_point=fn_name or None,
                test_setup=setup,
                io_tests=io_tests,
                source="apps",
                metadata={
                    "difficulty": rec.get("difficulty", str, ""),
                    "url": rec.get("url", str, ""),
                    "starter_code": starter,
                },
            )
        )
    return problems


def _as_text(value: Any) -> str:
    if isinstance(value, list):  # some APPS records store stdin as a list of lines
        return "\n".join(str(x) for x in value)
    return str(value)


_PYTHON3 = 3  # CodeContests Language enum: 1 = PYTHON (2), 2 = CPP, 3 = PYTHON3, 4 = JAVA


def load_code_contests(path: str | os.PathLike[str], include_generated: bool = False) -> list[CodeProblem]:
    """DeepMind CodeContests JSON lines (fields name, description, public_tests, private_tests,
    generated_tests as {"input": [...], "output": [...]}, solutions as {"language": [...],
    "solution": [...]}). All problems are stdin/stdout; the reference is the first Python 3
    solution. Generated tests are only included when asked (there are many)."""
    resolved = _resolve(path, "code_contests.jsonl")
    problems = []
    for lineno, raw in iter_jsonl(resolved):
        rec = _Record(resolved, lineno, raw)
        io_tests: list[IOTest] = []
        kinds = ["public_tests", "private_tests"] + (["generated_tests"] if include_generated else [])
        for kind in kinds:
            block = rec.get(kind, dict, {})
            ins, outs = block.get("input", []), block.get("output", [])
            if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
                raise rec.fail(f"{kind} needs equal-length 'input' and 'output' lists")
            io_tests += [IOTest(str(i), str(o)) for i, o in zip(ins, outs)]
        sols = rec.get("solutions", dict, {})
        langs, codes = sols.get("language", []), sols.get("solution", [])
        reference = next((c for lang, c in zip(langs, codes) if lang == _PYTHON3), "")
        problems.append(
            CodeProblem(
                id=f"code_contests/{rec.get('name', str)}",
                prompt=rec.get("description", str),
                reference_solution=reference,
                tests="",
                entry_point=None,
                io_tests=io_tests,
                source="code_contests",
                metadata={
                    k: rec.record[k]
                    for k in ("source", "difficulty", "cf_rating", "time_limit", "memory_limit_bytes")
                    if k in rec.record
                },
            )
        )
    return problems


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain data only: any global (class or function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")


def _lcb_cases(rec: _Record, name: str) -> list[dict[str, Any]]:
    """LiveCodeBench test cases: a JSON list, or base64(zlib(pickle(JSON string))) in the lite release."""
    value = rec.get(name, (str, list), [])
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            try:
                blob = _PlainUnpickler(io.BytesIO(zlib.decompress(base64.b64decode(value)))).load()
                value = json.loads(blob)
            except Exception as exc:  # noqa: BLE001 - any decoding failure is a format error
                raise rec.fail(f"{name} is neither JSON nor base64/zlib/pickled JSON ({exc})") from None
    if not isinstance(value, list) or not all(isinstance(c, dict) and "input" in c and "output" in c for c in value):
        raise rec.fail(f"{name} should be a list of {{input, output, testtype}} objects")
    return value


def load_livecodebench(path: str | os.PathLike[str]) -> list[CodeProblem]:
    """LiveCodeBench code_generation(_lite) JSON lines (fields question_id, question_title,
    question_content, platform, starter_code, difficulty, public_test_cases, private_test_cases,
    metadata). "stdin" test cases become io_tests; "functional" ones (LeetCode, one JSON value
    per input line, method named in metadata.func_name) become run_tests asserts."""
    resolved = _resolve(path, "livecodebench.jsonl")
    problems = []
    for lineno, raw in iter_jsonl(resolved):
        rec = _Record(resolved, lineno, raw)
        cases = _lcb_cases(rec, "public_test_cases") + _lcb_cases(rec, "private_test_cases")
        meta = rec.json_field("metadata", {}) or {}
        func_name = meta.get("func_name") if isinstance(meta, dict) else None
        starter = rec.get("starter_code", str, "")
        io_tests, calls = [], []
        for case in cases:
            if case.get("testtype", "stdin") == "functional":
                try:
                    args = [json.loads(line) for line in str(case["input"]).split("\n") if line.strip()]
                    calls.append((args, json.loads(str(case["output"]))))
                except json.JSONDecodeError as exc:
                    raise rec.fail(f"functional test case is not JSON: {exc.msg}") from None
            else:
                io_tests.append(IOTest(str(case["input"]), str(case["output"])))
        tests = setup = ""
        if calls:
            if not (isinstance(func_name, str) and func_name.isidentifier()):
                raise rec.fail("functional test cases need metadata.func_name")
            tests, setup = _call_based_tests(func_name, calls, "class Solution" in starter), _CALL_MATCH_SETUP
        problems.append(
            CodeProblem(
                id=f"livecodebench/{rec.get('question_id', (str, int))}",
                prompt=rec.get("question_content", str) + (f"\n{starter}" if starter else ""),
                reference_solution="",
                tests=tests,
                entry_point=func_name if calls else None,
                test_setup=setup,
                io_tests=io_tests,
                source="livecodebench",
                metadata={
                    k: rec.record[k]
                    for k in ("question_title", "platform", "difficulty", "contest_date")
                    if k in rec.record
                },
            )
        )
    return problems
