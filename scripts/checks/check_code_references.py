"""Sanity check of the code grader on real data: references must pass, planted bugs must fail.

Runs every HumanEval canonical solution and every MBPP reference solution (full and sanitized
files) through `Sandbox.run_tests`, then the same programs with a planted bug (every function
body replaced by `return None`), and prints counts such as

    HumanEval reference: 164/164 pass; planted bug: 0/164 pass

followed by the ids of every reference that fails (with the first error) and every bugged
program that still passes, so dataset problems are visible rather than hidden.

Then each HumanEval canonical solution is written the ways a model writes it (fenced or not,
whole program, the entry function alone, the body only, with helpers and a `__main__` block), read
by the code team's own parser (`parse_program`) and graded; every form must give 164/164:

    HumanEval as a model writes it: fenced_full 164/164 (accepted 164) ...

MBPP references are written fenced and unfenced, and, when the reference is one function and
nothing else, as the body alone (completing the `def` line the agents are shown).

    python -m scripts.checks.check_code_references [--data-dir DIR] [--workers N] [--forms-only]
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
import warnings
from pathlib import Path

from teamrl.sandbox import Sandbox, SandboxLimits, TestResult
from teamrl.tasks.code_data import CodeProblem, load_humaneval, load_mbpp
from teamrl.workflows.code_parsing import parse_program


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


def _entry_function(problem: CodeProblem) -> str:
    """The prompt's entry-point def (decorators, signature, docstring) without the imports and
    helpers before it, as a model that writes only "the function" does."""
    tree = ast.parse(problem.prompt)
    node = next(n for n in reversed(tree.body) if isinstance(n, ast.FunctionDef) and n.name == problem.entry_point)
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return "".join(problem.prompt.splitlines(keepends=True)[first - 1:])


def humaneval_forms(problem: CodeProblem) -> dict[str, str]:
    """The canonical solution as whole responses, in the forms models write it."""
    body = problem.reference_solution[len(problem.prompt):]
    full, function = problem.prompt + body, _entry_function(problem) + body
    helpers = ("def _unused_helper(value):\n    return value\n\n\n" + full.rstrip() + "\n\n\n"
               "class _Unused:\n    pass\n\n\nif __name__ == \"__main__\":\n"
               f"    print({problem.entry_point}.__name__)\n")
    return {
        "fenced_full": f"Here is the solution:\n```python\n{full}```\nIt works.",
        "unfenced_full": full,
        "fenced_function": f"```python\n{function}```",  # relies on the prompt's imports and helpers
        "unfenced_function": function,
        "unfenced_body": body,  # HumanEval completion style (several start with a nested helper def)
        "fenced_body": f"```python\n{body.strip(chr(10))}\n```",
        "stripped_body": body.strip(),  # the first line's indentation lost
        "with_helpers": f"```py\n{helpers}```\nUsage:\n```python\nprint({problem.entry_point})\n```",
    }


def mbpp_forms(problem: CodeProblem) -> dict[str, str]:
    """The MBPP reference as whole responses; body forms only for references that are one
    function and nothing else (a body cannot bring the imports or helpers the others need)."""
    forms = {"fenced_full": f"```python\n{problem.reference_solution.strip()}\n```", "unfenced_full": problem.reference_solution}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(problem.reference_solution)
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef) and tree.body[0].name == problem.entry_point:
        lines = problem.reference_solution.splitlines(keepends=True)
        body = "".join(lines[tree.body[0].body[0].lineno - 1:])
        forms |= {"unfenced_body": body, "fenced_body": f"```python\n{body.strip(chr(10))}\n```"}
    return forms


def grade_forms(box: Sandbox, problems: list[CodeProblem]) -> dict[str, tuple[int, int, int, list[str]]]:
    """form -> (problems written in it, accepted by parse_program, passing every test, ids that fail)."""
    forms: dict[str, list[tuple[CodeProblem, str, bool]]] = {}
    for problem in problems:
        for form, response in (humaneval_forms if problem.source == "humaneval" else mbpp_forms)(problem).items():
            forms.setdefault(form, []).append((problem, *parse_program(response, problem)))
    out = {}
    for form, parsed in forms.items():
        results = box.run_tests_many([{"program": program, "tests": p.tests, "entry_point": p.entry_point,
                                       "setup": p.test_setup} for p, program, _ in parsed])
        passing = [ok and r.all_passed for (_, _, ok), r in zip(parsed, results)]
        out[form] = (len(parsed), sum(ok for _, _, ok in parsed), sum(passing),
                     [p.id for (p, _, _), good in zip(parsed, passing) if not good])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None, help="directory with the data files "
                        "(default: $TEAMRL_DATA_DIR or ../shared/datasets)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--forms-only", action="store_true", help="only the response forms")
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
            forms = grade_forms(box, problems)
            print(f"{name} as a model writes it: " + ", ".join(
                f"{form} {passed}/{n} (accepted {accepted})" for form, (n, accepted, passed, _) in forms.items()))
            for form, (_, _, _, failing) in forms.items():
                if failing:
                    print(f"  {form} fails: {' '.join(failing)}")
            runs = sum(n for n, _, _, _ in forms.values())
            total += runs
            print(f"  ({runs} graded runs in {time.perf_counter() - t0:.1f}s)")
        for name, problems in [] if args.forms_only else sets:
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
