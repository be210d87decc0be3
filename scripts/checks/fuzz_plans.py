"""Fuzz the plan and study-workflow parsers with adversarial text: no crash, no hang.

Every parser of model output in this scope gets the same `n` inputs from adversarial generators
(long runs of one character, many separators, deep nesting, huge numbers, many repeated markers,
marker words followed by long runs of spaces, random mixes of valid fragments). Lengths are mostly
short, with a share up to `MAX_LEN` (200k characters, far beyond the longest response a config
allows: `rollout.max_new_tokens` is at most 48 tokens, about 400 characters at ~8 chars/token).

A *crash* is an exception, or a result that breaks the parser's contract (a plan with a move that
is not canonical, a grid of the wrong shape, a choice out of range, a verdict that is not a bool or
None, not n strategies). `max_seconds` is the slowest single call (wall clock, so it includes
this machine's load), `max_len` the longest input.

    python -m scripts.checks.fuzz_plans [n] [seed]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from typing import Any

from scripts.checks.fuzzing import print_rows, run_parsers
from teamrl.tasks.plan_parsing import int_grids, parse_action_list, parse_int_grid, parse_plan
from teamrl.workflows.plan_path_team import MOVE_ALIASES
from teamrl.workflows.flow_common import parse_choice, parse_strategies, parse_verdict
from teamrl.tasks.math_shape import answer_refusal
from teamrl.workflows.flow_domains import MathDomain
from teamrl.workflows.tool_plan import is_follow

MAX_LEN = 200_000
MOVES = frozenset("UDLR")
_FRAGMENTS = [
    "RRDD", "R R D D", "right, down", "['R', 'D']", "Moves: ", "Answer: ", "Path=", "follow", "Follow.",
    "```", "```python\n", "\n", "  ", "or", "/", "1234 3412 2143 4321", "[[1, 2, 3, 4], [3, 4, 1, 2]]",
    "1 2 | 3 4", "|---|---|", "\\boxed{", "\\boxed{0}", "\\boxed{Correct}", "\\boxed{Incorrect}", "}",
    "{", "ok", "no", "I ", "Correct or Incorrect", "I choose answer ", "my choice is ", "#", "1. ",
    "Strategy 2: ", "l r l", "\\text{", "3 or 20", "1,000", "\\pm", "-", "->", "*", "12+8=20", "####",
    "é", "\u2028", "\x00", "𝟙", "٣",
]
_CHARS = list(" \n\t\r[],{}\\#:=R1U9.->*`a|/0(;)'\"")


def _length(rng: random.Random) -> int:
    """Mostly short, sometimes long, now and then up to MAX_LEN (a log-uniform mix)."""
    roll = rng.random()
    top = 4_000 if roll < 0.9 else 40_000 if roll < 0.98 else MAX_LEN
    return int(round(10 ** rng.uniform(0, len(str(top)) - 1)))


def _run(rng: random.Random, n: int) -> str:
    return rng.choice(_CHARS) * n


def _separators(rng: random.Random, n: int) -> str:
    seps = [" ", ", ", ",", " -> ", ";", "\n", "' , '", "|", "/", "  \t"]
    out, size = [], 0
    while size < n:
        piece = rng.choice("UDLR") if rng.random() < 0.5 else rng.choice(seps)
        out.append(piece)
        size += len(piece)
    return "".join(out)[:n]


def _nesting(rng: random.Random, n: int) -> str:
    depth = max(1, n // 8)
    opener, closer = rng.choice([("[", "]"), ("{", "}"), ("\\boxed{", "}"), ("(", ")"), ("[[", "]]"),
                                 ("```\n", "\n```"), ("**", "**")])
    middle = rng.choice(["1", "R", "Correct", "0", "", "1, 2", " "])
    closed = depth if rng.random() < 0.5 else rng.randrange(depth + 1)
    return opener * depth + middle + closer * closed


def _huge_number(rng: random.Random, n: int) -> str:
    digits = "".join(rng.choice("0123456789") for _ in range(min(n, 20_000))) * max(1, n // 20_000)
    digits = "1" + digits[1:]
    return rng.choice([
        digits, f"\\boxed{{{digits}}}", f"Answer: {digits}", f"{digits} 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1",
        f"[[{digits}, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]", f"I choose answer {digits}",
        f"{digits}. first\n2. second\n3. third", f"Moves: R{digits}",
    ])


def _markers(rng: random.Random, n: int) -> str:
    marker = rng.choice(["Moves:", "answer", "Answer: ", "\\boxed{0}", "\\boxed{", "Correct or ", "1. ",
                         "follow ", "choose ", "Strategy 1:", "[[", "[[1]", "ok/", "moves", "#",
                         "\\text{", "path =", "\n1.", "choice is "])
    return marker * max(1, n // len(marker))


def _marker_then_spaces(rng: random.Random, n: int) -> str:
    marker = rng.choice(["answer", "moves", "[[1]", "[[1],", "\\boxed", "choose", "Strategy", "1", "\n", "ok",
                         "verdict", "\\boxed{0}"])
    fill = rng.choice([" ", "\n", "\t", " \n", ",", "  ,"])
    return marker + fill * max(1, (n - len(marker)) // len(fill)) + rng.choice(["x", "", "]", "1", ":"])


def _mix(rng: random.Random, n: int) -> str:
    out, size = [], 0
    while size < n:
        piece = rng.choice(_FRAGMENTS)
        out.append(piece)
        size += len(piece)
    return "".join(out)


GENERATORS: list[Callable[[random.Random, int], str]] = [
    _run, _separators, _nesting, _huge_number, _markers, _marker_then_spaces, _mix]


def _inputs(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for i in range(n):
        generator = GENERATORS[i % len(GENERATORS)]
        # The first input of each generator is a MAX_LEN one, so even a small n covers the worst case.
        length = MAX_LEN if i < len(GENERATORS) else _length(rng)
        texts.append(generator(rng, length)[: 2 * MAX_LEN])
    return texts


def _plan_ok(result: Any) -> bool:
    return result is None or (isinstance(result, list) and bool(result) and set(result) <= MOVES)


def _grid_ok(size: int) -> Callable[[Any], bool]:
    def ok(result: Any) -> bool:
        return result is None or (len(result) == size and all(len(r) == size for r in result))
    return ok


_DOMAIN = MathDomain.__new__(MathDomain)  # parse() reads no problems: no data set is loaded


class _Problem:
    answer = "20"


PARSERS: dict[str, tuple[Callable[[str], Any], Callable[[Any], bool]]] = {
    "parse_plan": (lambda t: parse_plan(t, MOVE_ALIASES), _plan_ok),
    "parse_action_list": (lambda t: parse_action_list(t, MOVE_ALIASES),
                          lambda r: isinstance(r, list) and set(r) <= MOVES),
    "is_follow": (is_follow, lambda r: isinstance(r, bool)),
    "parse_int_grid_4": (lambda t: parse_int_grid(t, 4), _grid_ok(4)),
    "parse_int_grid_9": (lambda t: parse_int_grid(t, 9), _grid_ok(9)),
    "int_grids_4": (lambda t: int_grids(t, 4), lambda r: all(_grid_ok(4)(g) and g is not None for g in r)),
    "parse_choice": (lambda t: parse_choice(t, 3), lambda r: r is None or r in (0, 1, 2)),
    "parse_verdict": (parse_verdict, lambda r: r[0] in (True, False, None) and isinstance(r[1], str)),
    "parse_strategies": (lambda t: parse_strategies(t, 3),
                         lambda r: len(r[0]) == 3 and isinstance(r[1], bool)),
    "study_answer": (lambda t: (_DOMAIN.parse(t, _Problem()), answer_refusal(t[:64], "18")),
                     lambda r: r[0].value is None or isinstance(r[0].value, str)),
}


def fuzz(n: int, seed: int = 0) -> list[dict]:
    """Run every parser on `n` adversarial inputs: one dict per parser (crashes, slowest call, longest input)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return run_parsers(PARSERS, _inputs(n, seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, nargs="?", default=500, help="inputs per parser")
    parser.add_argument("seed", type=int, nargs="?", default=0)
    args = parser.parse_args()
    rows = fuzz(args.n, args.seed)
    print_rows(rows)
    print(f"{sum(r['crashes'] for r in rows)} crashes")


if __name__ == "__main__":
    main()
