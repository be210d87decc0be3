"""Procedural code tasks and program mutants (checked on the host: all code here is ours)."""

from __future__ import annotations

import ast

import pytest

from teamrl.tasks.code_procedural import (
    BASE_FAMILIES, LIST_FAMILIES, mutate_program, procedural_code_problem, procedural_code_problems, specs,
)


def passes(program: str, tests: str) -> bool:
    namespace: dict = {}
    try:
        exec(program, namespace)  # noqa: S102 - generated references and their mutants only
        exec(tests, namespace)  # noqa: S102
    except Exception:  # noqa: BLE001 - any failure means "does not pass"
        return False
    return True


def test_instances_are_deterministic_and_well_formed():
    problems = procedural_code_problems("train", 30)
    assert problems == procedural_code_problems("train", 30)
    for p in problems:
        assert p.entry_point == "f" and p.source == "procedural"
        units = [line for line in p.tests.splitlines() if line.startswith("assert f(")]
        assert 3 <= len(units) == len(p.tests.splitlines()) <= 5
        assert passes(p.reference_solution, p.tests), p
        assert p.metadata["short"].startswith("f(") and p.metadata["short"].split(": ", 1)[1] in p.prompt
    assert len({p.metadata["spec"] for p in problems}) > 10  # a varied stream, not one task


def test_train_and_heldout_are_disjoint_by_task():
    train, heldout = {s.key for s in specs("train")}, {s.key for s in specs("heldout")}
    assert train and heldout and not train & heldout
    for family in ("add", "sub", "mul", "mod", "affine"):  # each parameterised family is on both sides
        assert any(k.startswith(family + ":") for k in heldout) and any(k.startswith(family + ":") for k in train)
    assert {s.family for s in specs("train")} == set(BASE_FAMILIES)
    held = procedural_code_problems("heldout", 20)
    assert all(p.metadata["spec"] in heldout for p in held)
    assert all(p.metadata["spec"] in train for p in procedural_code_problems("train", 50))
    assert procedural_code_problem("train", 3).id != procedural_code_problem("heldout", 3).id


def test_family_filter_and_errors():
    assert {procedural_code_problem("train", i, families=["add"]).metadata["family"] for i in range(10)} == {"add"}
    with pytest.raises(ValueError, match="unknown task families"):
        specs("train", ["nope"])
    with pytest.raises(ValueError, match="training-only"):
        specs("heldout", ["reverse"])
    with pytest.raises(ValueError, match="split"):
        procedural_code_problem("test", 0)
    with pytest.raises(ValueError):
        procedural_code_problem("train", -1)


def test_every_spec_has_a_mutant_its_tests_catch():
    for i in range(len(specs("train")) * 3):
        p = procedural_code_problem("train", i)
        mutants = mutate_program(p.reference_solution, p.entry_point, limit=8, seed=i)
        assert any(not passes(m, p.tests) for m in mutants), (p.reference_solution, mutants)


def test_mutants_are_single_site_distinct_and_seeded():
    source = "def helper(x):\n    return x + 1\n\ndef g(a, b):\n    '''doc'''\n    return [x for x in a if x > b - 1]\n"
    mutants = mutate_program(source, "g", limit=50, seed=1)
    assert len(mutants) == len(set(mutants)) >= 6
    assert mutants == mutate_program(source, "g", limit=50, seed=1)
    assert mutants != mutate_program(source, "g", limit=50, seed=2)  # another order
    for m in mutants:
        ast.parse(m)
        assert "return x + 1" in m  # only the entry point is mutated
        assert "'''doc'''" in m or '"""doc"""' in m  # docstrings are not sites
    assert mutate_program(source, "g", limit=3) == mutate_program(source, "g", limit=50)[:3]
    assert mutate_program("def f(:", "f") == [] and mutate_program("", "f") == []


def test_the_list_level_is_drawn_only_when_named_and_no_constant_passes_it():
    """`procedural:lists` is a harder level of its own: `procedural` alone never draws it (so the instances
    the base families always gave stay as they were), its held-out specs are parameters training never saw,
    and no instance's asserts all expect one value, so `return []` or `return 0` scores nothing."""
    assert not {s.family for s in specs("train") + specs("heldout")} & set(LIST_FAMILIES)
    # the base stream, as it was drawn before the list level existed
    assert [procedural_code_problem("heldout", i).metadata["spec"] for i in range(6)] == [
        "affine:2,8", "affine:4,5", "sub:2", "mul:7", "affine:5,8", "affine:5,8"]
    train, heldout = specs("train", ["lists"]), specs("heldout", ["lists"])
    assert {s.family for s in heldout} == set(LIST_FAMILIES) and not {s.key for s in train} & {s.key for s in heldout}
    problems = procedural_code_problems("heldout", 40, families=["lists"])
    assert {p.metadata["family"] for p in problems} <= set(LIST_FAMILIES)
    for p in problems + procedural_code_problems("train", 40, families=["lists"]):
        assert passes(p.reference_solution, p.tests), p
        args = p.prompt.split("(", 1)[1].split(")", 1)[0]
        for constant in ("[]", "0", "''", args):
            assert not passes(f"def f({args}):\n    return {constant}\n", p.tests), (p.prompt, constant)
        mutants = mutate_program(p.reference_solution, p.entry_point, limit=8, seed=1)
        assert any(not passes(m, p.tests) for m in mutants), p.reference_solution
    for split in ("train", "heldout"):  # without the rule about 1 instance in 70 expects one value throughout
        for p in procedural_code_problems(split, 400, families=["lists"]):
            assert len({line.split(" == ", 1)[1] for line in p.tests.splitlines()}) >= 2, p.tests
