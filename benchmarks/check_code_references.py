"""Sanity check of the code grader on real data: references must pass, planted bugs must fail.

Runs every HumanEval canonical solution and every MBPP reference solution (full and sanitized
files) through `Sandbox.run_tests`, then the same programs with a planted bug (every function
body replaced by `return None`), and prints counts such as

    HumanEval reference: 164/164 pass; planted bug: 0/164 pass

followed by the ids of every reference that fails (with the first error) and every bugged
program that still passes, so dataset problems are visible rather than hidden.

    PYTHONPATH=src python benchmarks/check_code_references.py [--data-dir DIR] [--workers N]
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
import warnings
from pathlib import Path

try:
    from teamrl.sandbox import Sandbox, SandboxLimits, TestResult
    from teamrl.tasks.code_data import CodeProblem, load_humaneval, load_mbpp
except ImportError:  # run from a source checkout without PYTHONPATH=src
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from teamrl.sandbox import Sandbox, SandboxLimits, TestResult
    from teamrl.tasks.code_data import CodeProblem, load_humaneval, load_mbpp


def plant_bug(program: str) -> str:
    """Replace the body of every function (top level and nested in classes) with `return None`."""
    with warnings.catch_warnings():  # old MBPP code has invalid escapes like "\d" in plain strings
        warnings.simplefilter("ignore")
        tree = ast.parse(program)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = [ast.Return(ast.Constant(None))]
    return ast.unparse(tree)


def grade(box: Sandbox, problems: list[CodeProblem], bugged: bool) -> list[TestResult]:
    jobs = []
    for problem in problems:
        program = problem.reference_solution
        if bugged:
            program = plant_bug(program)
        jobs.append({"program": program, "tests": problem.tests, "entry_point": problem.entry_point,
                     "setup": problem.test_setup})
    return box.run_tests_many(jobs)


def report(name: str, problems: list[CodeProblem], refs: list[TestResult], bugs: list[TestResult]) -> None:
    ok = sum(r.all_passed for r in refs)
    bug_ok = sum(r.all_passed for r in bugs)
    units = sum(r.passed for r in refs), sum(r.total for r in refs)
    bug_units = sum(r.passed for r in bugs), sum(r.total for r in bugs)
    print(f"{name} reference: {ok}/{len(problems)} pass; planted bug: {bug_ok}/{len(problems)} pass "
          f"(asserts: reference {units[0]}/{units[1]}, planted bug {bug_units[0]}/{bug_units[1]})")
    for problem, res in zip(problems, refs):
        if not res.all_passed:
            first = next((c for c in res.cases if not c.passed), None)
            detail = f"{first.source[:90]!r}: {first.error[:120]}" if first else res.error[:200]
            print(f"  reference fails {problem.id} [{res.status}, {res.passed}/{res.total}] {detail}")
    for problem, res in zip(problems, bugs):
        if res.all_passed:
            print(f"  planted bug still passes {problem.id} ({res.total} asserts): {problem.tests[:100]!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None, help="directory with the data files "
                        "(default: $TEAMRL_DATA_DIR or ../shared/datasets)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    base = args.data_dir
    sets = [
        ("HumanEval", load_humaneval(base / "HumanEval.jsonl.gz" if base else None)),
        ("MBPP", load_mbpp(base / "mbpp.jsonl" if base else None)),
        ("MBPP-sanitized", load_mbpp(base / "mbpp_sanitized.jsonl" if base else None, sanitized=True)),
    ]
    limits = SandboxLimits(wall_time_s=10.0, cpu_time_s=10.0, memory_mb=1024)
    start = time.perf_counter()
    total = 0
    with Sandbox(limits, workers=args.workers) as box:
        print(f"isolation: network={box.isolation['network']} filesystem={box.isolation['filesystem']} "
              f"uid={box.isolation['sandbox_uid']} workers={args.workers}")
        for name, problems in sets:
            t0 = time.perf_counter()
            refs = grade(box, problems, bugged=False)
            bugs = grade(box, problems, bugged=True)
            total += 2 * len(problems)
            report(name, problems, refs, bugs)
            print(f"  ({2 * len(problems)} graded runs in {time.perf_counter() - t0:.1f}s)")
    elapsed = time.perf_counter() - start
    print(f"total: {total} graded runs in {elapsed:.1f}s ({total / elapsed:.1f} runs/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
