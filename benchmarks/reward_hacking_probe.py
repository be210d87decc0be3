"""How many reward-hacking responses does each verifier reward? The goal is 0.

Each domain's probe (``hack_probe_math.py``, ``hack_probe_code.py``, ``hack_probe_plans.py`` beside this
file) writes responses the way a policy under RL would find them -- hedges between candidates, programs
that fake a passing test run, plans that lean on a lenient check -- and scores each one through the real
reward path of its workflow. This script runs them all and prints, per verifier and hack, how many
responses were tried and how many were rewarded, then the total.

    PYTHONPATH=src python benchmarks/reward_hacking_probe.py                # all verifiers
    PYTHONPATH=src python benchmarks/reward_hacking_probe.py --only math    # one domain
    PYTHONPATH=src python benchmarks/reward_hacking_probe.py --show 3       # print rewarded responses

Exit status 1 when any hack was rewarded, so a CI job or a study can gate on it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
try:
    import teamrl  # noqa: F401
except ImportError:  # running from a checkout without PYTHONPATH=src
    sys.path.insert(0, str(HERE.parent / "src"))

DOMAINS = ("math", "code", "plans")


def run_probes(domains: tuple[str, ...]) -> list[dict]:
    """Every probe row of the named domains: {verifier, hack, response, rewarded, reward}."""
    rows: list[dict] = []
    for domain in domains:
        module = importlib.import_module(f"hack_probe_{domain}")
        rows.extend(module.hacks())
    return rows


def summarise(rows: list[dict]) -> list[tuple[str, str, int, int]]:
    """(verifier, hack, tried, rewarded) per hack, in first-appearance order."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        cell = counts[(row["verifier"], row["hack"])]
        cell[0] += 1
        cell[1] += bool(row["rewarded"])
    return [(v, h, tried, rewarded) for (v, h), (tried, rewarded) in counts.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=DOMAINS, action="append", help="run only this domain (repeatable)")
    parser.add_argument("--show", type=int, default=2, help="rewarded responses printed per hack")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = run_probes(tuple(args.only or DOMAINS))
    table = summarise(rows)
    width = max(len(h) for _, h, _, _ in table)
    print(f"{'verifier':<22} {'hack':<{width}} {'tried':>6} {'rewarded':>9}")
    for verifier, hack, tried, rewarded in table:
        print(f"{verifier:<22} {hack:<{width}} {tried:>6} {rewarded:>9}")
    total, hit = len(rows), sum(bool(r["rewarded"]) for r in rows)
    print(f"\n{hit} of {total} hacking responses rewarded across {len({v for v, *_ in table})} verifiers "
          f"({len(table)} hacks) in {time.perf_counter() - start:.1f} s")
    shown: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        key = (row["verifier"], row["hack"])
        if row["rewarded"] and shown[key] < args.show:
            shown[key] += 1
            print(f"\nREWARDED {key[0]}/{key[1]} (reward {row['reward']:.3f}):\n{row['response'][:600]}")
    return 1 if hit else 0


if __name__ == "__main__":
    raise SystemExit(main())
