"""Fuzz every parser of model output: 0 crashes and no input slower than a second is the goal.

Each domain's fuzzer (``fuzz_math.py``, ``fuzz_code.py``, ``fuzz_plans.py`` beside this file) feeds its
parsers adversarial inputs -- long runs of one character, deep nesting, huge numbers, many fences or
markers, random mixes of valid fragments -- up to and beyond the longest response a shipped config
allows, and reports per parser the inputs tried, the crashes (any exception a parser promises not to
raise) and the slowest input. This script runs them all and prints one table.

    python -m scripts.checks.fuzz_parsers --n 20000          # the issue's bar: 20k per parser
    python -m scripts.checks.fuzz_parsers --n 500 --only code

Exit status 1 when any parser crashed or took over ``--limit-s`` on one input.
"""

from __future__ import annotations

import argparse
import importlib
import time

from scripts.checks.fuzzing import print_rows

DOMAINS = ("math", "code", "plans")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20000, help="inputs per parser")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=DOMAINS, action="append", help="fuzz only this domain (repeatable)")
    parser.add_argument("--limit-s", type=float, default=1.0, help="slowest single input allowed")
    args = parser.parse_args()
    start = time.perf_counter()
    rows: list[dict] = []
    for domain in args.only or DOMAINS:
        rows.extend(importlib.import_module(f"scripts.checks.fuzz_{domain}").fuzz(args.n, args.seed))
    print_rows(rows)
    crashes = sum(r["crashes"] for r in rows)
    slow = [r["parser"] for r in rows if r["max_seconds"] > args.limit_s]
    print(f"\n{len(rows)} parsers, {sum(r['inputs'] for r in rows)} inputs, {crashes} crashes, "
          f"{len(slow)} parsers with an input over {args.limit_s:g} s, in {time.perf_counter() - start:.0f} s")
    return 1 if crashes or slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
