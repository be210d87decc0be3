"""The loop every parser fuzzer shares: run each parser on the same inputs, count crashes, time the worst.

`fuzz_math.py`, `fuzz_code.py` and `fuzz_plans.py` make the adversarial inputs and name the parsers;
`fuzz_parsers.py` runs them all. A crash is any exception (the parsers promise never to raise on a
`str`) or, where a parser comes with a check, a result the check refuses.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Parser = Callable[[str], Any]
Checked = tuple[Parser, Callable[[Any], bool]]


def run_parsers(parsers: dict[str, Parser | Checked], texts: list[str],
                clock: Callable[[], float] = time.perf_counter) -> list[dict]:
    """One row per parser: {"parser", "inputs", "crashes", "max_seconds", "max_len"}.

    parsers: name -> parser, or name -> (parser, check of its result). clock: what "seconds" means
    (time.process_time: CPU seconds of this process, whatever else the machine runs; the default wall
    clock also counts the work a parser hands to a child process, such as the math checker's).
    """
    rows = []
    for name, entry in parsers.items():
        parse, check = entry if isinstance(entry, tuple) else (entry, None)
        crashes, slowest = 0, 0.0
        for text in texts:
            start = clock()
            try:
                result = parse(text)
                good = check is None or bool(check(result))
            except Exception:  # noqa: BLE001 - any exception is a crash of the parser
                good = False
            slowest = max(slowest, clock() - start)
            crashes += not good
        rows.append({"parser": name, "inputs": len(texts), "crashes": crashes, "max_seconds": round(slowest, 4),
                     "max_len": max(map(len, texts), default=0)})
    return rows


def print_rows(rows: list[dict]) -> None:
    """The rows as a table, one line per parser."""
    width = max((len(r["parser"]) for r in rows), default=6)
    print(f"{'parser':<{width}} {'inputs':>7} {'crashes':>8} {'slowest s':>10} {'longest input':>14}")
    for r in rows:
        print(f"{r['parser']:<{width}} {r['inputs']:>7} {r['crashes']:>8} {r['max_seconds']:>10.4f} {r['max_len']:>14}")
