"""The shared fuzz loop (scripts/checks/fuzzing.py) counts what it claims to: crashes, refused results, time."""

from __future__ import annotations

import time

from scripts.checks import fuzzing


def test_run_parsers_counts_exceptions_refused_results_and_the_slowest_input():
    calls = []

    def parse(text: str) -> int:
        calls.append(text)
        if text == "boom":
            raise ValueError(text)
        if text == "zz":
            time.sleep(0.02)
        return len(text)

    texts = ["a", "boom", "zz", "abcd"]  # "zz" is the slow one
    rows = fuzzing.run_parsers({"plain": parse, "checked": (parse, lambda n: n < 4)}, texts)
    assert calls == texts * 2  # every parser really ran on every input
    plain, checked = rows
    assert (plain["parser"], plain["inputs"], plain["crashes"], plain["max_len"]) == ("plain", 4, 1, 4)
    assert checked["crashes"] == 2  # "boom" raised, "abcd" failed its check
    assert plain["max_seconds"] >= 0.02 and checked["max_seconds"] >= 0.02
