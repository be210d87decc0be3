"""The code verifier's benchmarks keep their promises: no hack rewarded, no parser crash, real mutants."""

from __future__ import annotations

import ast

from scripts.checks import fuzz_code
from scripts.checks import grader_agreement
from scripts.checks import hack_probe_code

from data_sets import needs_full_data




@needs_full_data("HumanEval.jsonl.gz")
def test_no_code_hack_is_rewarded():
    rows = hack_probe_code.hacks()
    assert len(rows) >= 30 and {r["verifier"] for r in rows} == {"code"}
    assert [r["hack"] for r in rows if r["rewarded"]] == []
    assert all(r["reward"] <= 0.1 + 1e-9 for r in rows)  # at most a wrong program's format bonus


def test_fuzzed_parsers_do_not_crash():
    rows = fuzz_code.fuzz(18, seed=1)
    assert len(rows) == 5 and all(r["inputs"] == 18 and r["crashes"] == 0 for r in rows), rows


def test_mutator_makes_single_site_mutants_of_each_kind():
    agreement = grader_agreement
    program = "def f(xs, k):\n    out = 0\n    for x in xs:\n        if x < k:\n            out += x * 2\n    return out\n"
    made = agreement.mutants(program, "f", 50, "seed")
    kinds = {kind for kind, _ in made}
    assert kinds == {"operator", "off_by_one", "constant", "drop_line", "wrong_return"}, kinds
    for _, mutant in made:
        assert ast.unparse(ast.parse(mutant)) != ast.unparse(ast.parse(program))
    assert len({m for _, m in made}) == len(made)
