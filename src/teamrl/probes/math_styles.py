"""Rates of the four math graders on the answer-style grammar (`teamrl.probes.answer_styles`).

    python -m teamrl.probes.math_styles                 # correct answers refused, wrong and echoed
    python -m teamrl.probes.math_styles --count 3000    # answers rewarded, per grader and family

The graders: the math team's reasoner and tool (`MathWorkflow.apply`, team term 1.0), the study
workflows' math grader (`MathDomain.parse` then `grade`) and `answers_match`. The tool's answer is what
its program prints: the probe's runner hands each program's printed line back without running it, so
only the grading is measured. Goals, on held-out families: under 1% of correct answers refused, no
wrong or echoed answer rewarded.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from teamrl.probes.answer_styles import (
    StyleCase,
    StyleQuestion,
    echo_cases,
    load_questions,
    style_cases,
)
from teamrl.tasks.math_answers import answers_match
from teamrl.tasks.math_data import MathProblem
from teamrl.workflows.math_team import MathWorkflow, ProblemSplits
from teamrl.workflows.flow_domains import MathDomain

__all__ = ["GRADERS", "grade_cases", "main", "rates"]

GRADERS = ("reasoner", "tool", "study", "answers_match")


class _PrintedRunner:
    """Stands in for the sandbox: `print(bytes.fromhex('<hex>').decode())` printed the text `<hex>` encodes
    (hex, so that no printed text, a code fence included, can end the program's own block)."""

    def run(self, sources: list[str]) -> list[tuple[str, bool]]:
        out = []
        for source in sources:
            call = ast.parse(source).body[0].value  # type: ignore[attr-defined]
            out.append((bytes.fromhex(ast.literal_eval(call.args[0].func.value.args[0])).decode() + "\n", True))
        return out

    def close(self) -> None:
        pass


class _Graders:
    """The four graders over one fixed list of questions."""

    def __init__(self, questions: list[StyleQuestion]) -> None:
        problems = [MathProblem(f"style-{i}", q.question, q.answer, source=q.source) for i, q in enumerate(questions)]
        self.index = {(q.question, q.answer): i for i, q in enumerate(questions)}
        self.problems = problems
        splits = ProblemSplits(problems, problems, "answer-styles")
        self.workflow = MathWorkflow(splits, runner=_PrintedRunner())  # type: ignore[arg-type]
        self.study = MathDomain(splits)

    def rewarded(self, case: StyleCase) -> dict[str, bool]:
        i = self.index[(case.question.question, case.question.answer)]
        problem = self.problems[i]
        reasoner = self.workflow.apply("reasoner", self.workflow.new_state("train", i), case.response).team >= 1.0
        program = f"```python\nprint(bytes.fromhex({case.printed.encode().hex()!r}).decode())\n```"
        tool = self.workflow.apply("tool", self.workflow.new_state("train", i), program).team >= 1.0
        study = self.study.grade([problem], [self.study.parse(case.response, problem)])[0] >= 1.0
        return {
            "reasoner": reasoner,
            "tool": tool,
            "study": study,
            "answers_match": answers_match(
                case.response, problem.answer, question=problem.question, source=problem.source
            ),
        }

    def close(self) -> None:
        self.workflow.close()


def grade_cases(cases: Iterable[StyleCase], questions: list[StyleQuestion]) -> list[tuple[StyleCase, dict[str, bool]]]:
    """Each case with whether each grader rewarded it."""
    graders = _Graders(questions)
    try:
        return [(case, graders.rewarded(case)) for case in cases]
    finally:
        graders.close()


def _failed(case: StyleCase, rewarded: bool) -> bool:
    return rewarded != (case.kind == "correct")


def rates(graded: list[tuple[StyleCase, dict[str, bool]]]) -> dict[str, Any]:
    """Failures / tried per (split, kind, grader) and per (family, kind, grader), with the failed cases."""
    totals: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    families: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    failures = []
    for case, verdict in graded:
        split = "held-out" if case.held_out else "tuning"
        for grader in GRADERS:
            failed = _failed(case, verdict[grader])
            for table, key in (
                (totals, (split, case.kind, grader)),
                *((families, (family, case.kind, grader)) for family in case.families),
            ):
                table[key][0] += failed
                table[key][1] += 1
        if any(_failed(case, verdict[g]) for g in GRADERS):
            failures.append((case, [g for g in GRADERS if _failed(case, verdict[g])]))
    return {"totals": dict(totals), "families": dict(families), "failures": failures}


def _line(label: str, cells: dict[str, list[int]]) -> str:
    parts = []
    for grader in GRADERS:
        failed, tried = cells[grader]
        parts.append(f"{failed:>4}/{tried:<5}" if tried else f"{'-':>10}")
    return f"{label:<52}" + " ".join(f"{p:>11}" for p in parts)


def report(result: dict[str, Any], out: Any = None, show_failures: int = 20) -> None:
    """Print the rates: per split and kind, then per family (failed / tried, per grader)."""
    out = out or sys.stdout
    totals, families = result["totals"], result["families"]
    what = {"correct": "correct refused", "wrong": "wrong rewarded", "echo": "echo rewarded"}
    print(f"{'':<52}" + " ".join(f"{g:>11}" for g in GRADERS), file=out)
    for split in ("tuning", "held-out"):
        for kind in ("correct", "wrong", "echo"):
            print(_line(f"{split}: {what[kind]}", {g: totals.get((split, kind, g), [0, 0]) for g in GRADERS}), file=out)
    print("\nper family (failed/tried):", file=out)
    for family in sorted({f for f, _, _ in families}):
        for kind in ("correct", "wrong", "echo"):
            if (family, kind, GRADERS[0]) in families:
                print(_line(f"  {family} [{what[kind]}]", {g: families[(family, kind, g)] for g in GRADERS}), file=out)
    for case, graders in result["failures"][:show_failures]:
        print(
            f"FAILED {case.kind} {case.families} by {', '.join(graders)}: "
            f"{case.response[-120:]!r} (gold {case.question.answer!r})",
            file=out,
        )


def main(argv: list[str] | None = None) -> int:
    """Print the rates; exit 1 when a held-out goal is missed."""
    parser = argparse.ArgumentParser(prog="python -m teamrl.probes.math_styles", description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1500, help="correct answers to generate (as many wrong ones)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--failures", type=int, default=20, help="failed cases to print")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error(f"--count must be >= 1, got {args.count}")
    questions = load_questions()
    cases = [*style_cases(questions, args.count, args.seed), *echo_cases(questions, args.seed)]
    result = rates(grade_cases(cases, questions))
    report(result, show_failures=args.failures)
    totals = result["totals"]
    missed = [
        g
        for g in GRADERS
        if totals.get(("held-out", "correct", g), [0, 1])[0] >= 0.01 * totals.get(("held-out", "correct", g), [0, 1])[1]
        or any(totals.get(("held-out", k, g), [0, 0])[0] for k in ("wrong", "echo"))
    ]
    if missed:
        print(f"held-out goals missed by: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
