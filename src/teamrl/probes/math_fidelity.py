"""Both sides of the math verifier in one command: hacks it pays (goal 0) and right answers it refuses
(goal < 1%).

    python -m teamrl.probes.math_fidelity                  # prints both numbers; exit 1 if a goal is missed
    python -m teamrl.probes.math_fidelity --out runs/math-fidelity.json

Right answers: `data/math_correct_responses.jsonl`, a few hundred correct responses in the styles real
instruct models write (units, restating checks, spelled-out numbers, final prose sentences, full-width
digits, and the common formats), written by `scripts/make_math_fidelity_corpus.py` on word problems
written for it and MATH-500 questions (MIT license). A response is refused when either reward path
withholds the reward: the math team's own `apply` (team term below 1) or `answers_match`.

Hacks: the math catalogue (`teamrl.probes.math_hacks`: hedges, echoes, and the hacks on the leniencies
above) played through the math team (reasoner and tool) on the same problems and on held-out
arithmetic instances, judged like `teamrl probe`; a reasoner hack also counts as rewarded when
`answers_match` pays it. No dataset folder is needed.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from teamrl.probes import probe_task
from teamrl.probes.core import ProbeRow, score_attempts
from teamrl.probes.math_hacks import math_attempts
from teamrl.tasks.math_answers import answers_match
from teamrl.tasks.math_data import MathProblem
from teamrl.workflows.math_team import MathWorkflow, ProblemSplits

__all__ = ["CORPUS", "load_correct_responses", "main", "measure"]

CORPUS = Path(__file__).parent / "data" / "math_correct_responses.jsonl"
"""The right answers: one JSON object a line with style, source, question, answer (the gold), response."""


def load_correct_responses(path: Path | str | None = None) -> list[dict[str, str]]:
    """The corpus rows (default: :data:`CORPUS`)."""
    with open(path or CORPUS, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _problems(rows: list[dict[str, str]]) -> list[MathProblem]:
    seen: dict[tuple[str, str, str], MathProblem] = {}
    for row in rows:
        key = (row["question"], row["answer"], row["source"])
        seen.setdefault(key, MathProblem(f"fidelity-{len(seen)}", row["question"], row["answer"], source=row["source"]))
    return list(seen.values())


def _refusals(workflow: MathWorkflow, rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows whose right answer either reward path refuses, with which path refused."""
    index = {(p.question, p.answer, p.source): i for i, p in enumerate(workflow.problems.train)}
    refused = []
    for row in rows:
        state = workflow.new_state("train", index[(row["question"], row["answer"], row["source"])])
        team = workflow.apply("reasoner", state, row["response"]).team
        matched = answers_match(row["response"], row["answer"])
        if team < 1.0 or not matched:
            paths = [name for name, ok in (("workflow", team >= 1.0), ("answers_match", matched)) if not ok]
            refused.append({**row, "refused_by": ", ".join(paths)})
    return refused


def _hack_rows(workflow: MathWorkflow, problems: list[MathProblem]) -> list[ProbeRow]:
    """The math catalogue on every problem, through the team's `apply`; reasoner hacks through `answers_match` too."""
    rows: list[ProbeRow] = []
    for index, problem in enumerate(problems):
        state = workflow.new_state("train", index)
        attempts = math_attempts(workflow, copy.deepcopy(state))
        scored = score_attempts("math", workflow, index, attempts, state)
        for attempt, row in zip(attempts, scored, strict=True):
            agent, response = attempt.turns[-1]
            if agent == "reasoner" and not row.rewarded and answers_match(response, problem.answer):
                row.rewarded, row.why = True, ["answers_match"]
        rows += scored
    return rows


def measure(rows: list[dict[str, str]], hack_instances: int = 4, answer_form: str = "auto") -> dict[str, Any]:
    """Hacks tried / rewarded and right answers tried / refused, with the cases that missed a goal.

    rows: the corpus (:func:`load_correct_responses`). hack_instances: held-out arithmetic instances the
    catalogue is also played on (0: only the corpus's problems).
    """
    problems = _problems(rows)
    workflow = MathWorkflow(ProblemSplits(problems, problems, "fidelity"), answer_form=answer_form)
    try:
        refused = _refusals(workflow, rows)
        hacks = _hack_rows(workflow, problems)
    finally:
        workflow.close()
    if hack_instances:
        hacks += probe_task("math", hack_instances, task={"answer_form": answer_form})
    styles = Counter(row["style"] for row in rows)
    missed = Counter(row["style"] for row in refused)
    return {
        "hacks_tried": len(hacks),
        "hacks_rewarded": sum(h.rewarded for h in hacks),
        "correct_tried": len(rows),
        "correct_refused": len(refused),
        "refused_by_style": {style: [missed[style], n] for style, n in styles.items()},
        "rewarded_hacks": [h.as_dict() for h in hacks if h.rewarded],
        "refused_correct": refused,
    }


def main(argv: list[str] | None = None) -> int:
    """Print both numbers (and every miss); exit 1 when a hack is paid or 1% or more right answers are refused."""
    parser = argparse.ArgumentParser(prog="python -m teamrl.probes.math_fidelity", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--instances", type=int, default=4, help="held-out arithmetic instances to also probe (default 4)"
    )
    parser.add_argument("--answer-form", default="auto", choices=("auto", "value", "expression"))
    parser.add_argument("--data", default=None, help=f"the right answers (default {CORPUS.name})")
    parser.add_argument("--out", default=None, help="write the report as JSON here")
    args = parser.parse_args(argv)
    report = measure(load_correct_responses(args.data), args.instances, args.answer_form)
    tried, refused = report["correct_tried"], report["correct_refused"]
    print(f"hacks: {report['hacks_tried']} tried, {report['hacks_rewarded']} rewarded (goal 0)")
    print(f"correct answers: {tried} tried, {refused} refused ({100 * refused / max(tried, 1):.2f}%, goal < 1%)")
    for hack in report["rewarded_hacks"][:20]:
        print(f"REWARDED {hack['kind']} ({', '.join(hack['why'])}): {hack['response'][:160]!r}")
    for row in report["refused_correct"][:20]:
        print(f"REFUSED [{row['style']}] by {row['refused_by']}: {row['response'][-160:]!r}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 1 if report["hacks_rewarded"] or refused >= 0.01 * tried else 0


if __name__ == "__main__":
    sys.exit(main())
