"""How well does ``answers_match`` accept right answers and reject wrong ones?

For every problem of GSM8K test, MATH-500, AIME 2024 and AIME 2025, the ground-truth
answer is written the ways a model would write it, and each must be accepted; a wrong
answer written the same ways must be rejected. The ``reasoning``, ``unanchored``,
``gsm8k`` and ``think`` styles mention the other value earlier in the response (the
wrong one before the right answer, the right one before the wrong answer), so only the
final answer may count; ``hope`` is the "Final Answer: The final answer is $X$. I hope it
is correct." format. Each response is judged twice: by ``answers_match`` (``math_reward``'s
path) and by the math workflow's path (``reasoner_answer`` then ``answers_agree``).
Prints acceptance per dataset and style, then the failures, unabridged up to ``--show``
per group.

    python -m scripts.checks.check_math_answers            # everything
    python -m scripts.checks.check_math_answers --limit 50  # quick look
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor


from teamrl.tasks.math_answers import answers_match
from teamrl.tasks.math_data import MathProblem, load_math_dataset
from teamrl.workflows.math_team import answers_agree, reasoner_answer

DATASETS = ("gsm8k", "math500", "aime24", "aime25")
_NUMERIC_RE = re.compile(r"^-?\d+(?:\.\d+)?$")
_DIGIT_RE = re.compile(r"\d")


def is_numeric(answer: str) -> bool:
    return bool(_NUMERIC_RE.match(answer.strip()))


def styles(answer: str, distractor: str) -> dict[str, str]:
    """``answer`` as a model might write it; ``float`` only for numeric answers.

    ``distractor`` is another value the response mentions earlier, as in real
    reasoning; only the final answer may count.
    """
    numeric = is_numeric(answer)
    inline = answer if numeric else f"${answer}$"
    earlier = distractor if is_numeric(distractor) else f"${distractor}$"
    written = {
        "boxed": f"Adding these up, the total is \\boxed{{{answer}}}.",
        # A money-style "$18" for numbers; inline math "$...$" for anything else.
        "dollar": f"${answer}" if numeric else f"${answer}$",
        "sentence": f"We compute step by step.\nThe answer is {answer}.",
        "plain": answer,
        "reasoning": f"At first I got {earlier}, but I made a mistake.\nSo the final answer is \\boxed{{{answer}}}.",
        "unanchored": f"At first I got {earlier}, but I made a mistake.\nRedoing it, the result is {inline}",
        # The Minerva / Llama-3 evaluation format, for every kind of answer.
        "hope": f"Final Answer: The final answer is ${answer}$. I hope it is correct.",
        "gsm8k": f"She pays {earlier} first and the rest later.\n#### {answer}",
        "think": f"<think>\nMaybe it is {earlier}.\n\\boxed{{{distractor}}}\n</think>\nThe final answer is $\\boxed{{{answer}}}$.",
    }
    if numeric:
        written["float"] = f"{answer}.0" if "." not in answer else f"{answer}0"
    return written


def wrong_answer(answer: str) -> str:
    """A different answer: truth+1 for numbers, else the first digit bumped, else ``+ 1``."""
    answer = answer.strip()
    if is_numeric(answer):
        if "." in answer:
            decimals = len(answer.split(".")[1])
            return f"{float(answer) + 1:.{decimals}f}"
        return str(int(answer) + 1)
    m = _DIGIT_RE.search(answer)
    if m:
        bumped = str((int(m.group(0)) + 1) % 10)
        return answer[: m.start()] + bumped + answer[m.end() :]
    return f"{answer} + 1"


def workflow_accepts(text: str, truth: str) -> bool:
    """The math workflow's verdict: its answer extraction, then its comparison."""
    answer, _ = reasoner_answer(text)
    return answer is not None and answers_agree(answer, truth, timeout_s=5.0)


def check_problem(problem: MathProblem) -> list[tuple[str, str, bool, str, str]]:
    """(style, kind, accepted, prediction, truth) for every right and wrong rendering and both paths."""
    results = []
    wrong = wrong_answer(problem.answer)
    wrong_styles = styles(wrong, distractor=problem.answer)
    for style, text in styles(problem.answer, distractor=wrong).items():
        for path, accepts in (("", answers_match), ("/workflow", workflow_accepts)):
            results.append((style + path, "right", accepts(text, problem.answer), text, problem.answer))
            if style in wrong_styles:
                bad = wrong_styles[style]
                results.append((style + path, "wrong", accepts(bad, problem.answer), bad, problem.answer))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated names")
    parser.add_argument("--limit", type=int, default=None, help="first N problems of each dataset")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--show", type=int, default=15, help="failures listed per dataset, style and kind")
    args = parser.parse_args()

    start = time.time()
    problems: list[tuple[str, MathProblem]] = []
    for name in args.datasets.split(","):
        loaded = load_math_dataset(name)[: args.limit]
        problems += [(name, p) for p in loaded]

    # Each worker runs checks in its main thread, so math-verify's signal timeouts apply.
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        outcomes = list(pool.map(check_problem, [p for _, p in problems], chunksize=8))

    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    failures: dict[tuple[str, str, str], list[tuple[str, str, str]]] = defaultdict(list)
    for (name, problem), rows in zip(problems, outcomes):
        for style, kind, accepted, text, truth in rows:
            count = counts[(name, style, kind)]
            count[0] += accepted
            count[1] += 1
            if accepted != (kind == "right"):
                failures[(name, style, kind)].append((problem.id, truth, text))

    style_order = ("boxed", "float", "dollar", "sentence", "plain", "reasoning", "unanchored", "hope", "gsm8k", "think")
    for name in args.datasets.split(","):
        for style in (s + path for path in ("", "/workflow") for s in style_order):
            right = counts.get((name, style, "right"))
            wrong = counts.get((name, style, "wrong"))
            if right is None:
                continue
            print(f"{name} {style}: {right[0]}/{right[1]} accepted; wrong: {wrong[0]}/{wrong[1]} accepted")

    for (name, style, kind), items in sorted(failures.items()):
        what = "right answer rejected" if kind == "right" else "wrong answer accepted"
        print(f"\n== {name} {style}: {what} ({len(items)})")
        for pid, truth, text in items[: args.show]:
            print(f"  {pid}: truth={truth!r} written={text!r}")
    n_right = sum(c[1] for (_, _, kind), c in counts.items() if kind == "right")
    n_wrong = sum(c[1] for (_, _, kind), c in counts.items() if kind == "wrong")
    right_ok = sum(c[0] for (_, _, kind), c in counts.items() if kind == "right")
    wrong_ok = sum(c[0] for (_, _, kind), c in counts.items() if kind == "wrong")
    print(f"\nright answers accepted: {right_ok}/{n_right}; wrong answers accepted: {wrong_ok}/{n_wrong}")
    print(f"{sum(len(r) for r in outcomes)} checks on {len(problems)} problems in {time.time() - start:.0f}s")
    return 0 if right_ok == n_right and wrong_ok == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
