"""Procedural one-line function tasks a tiny character-level model can learn, and program mutants.

Tasks. Each instance asks for a function `f` from a small family (`x plus 3`, `x times 4`,
`x times 2 plus 5`, `x mod 3`, `the larger of a and b`, `s reversed`, ...) and carries a
reference solution and 3-5 ground-truth asserts on seeded random inputs. A harder level, drawn only
when named (`procedural:lists`), asks for list and string functions with a parameter (`the number of
elements of xs greater than 4`, `the first 3 elements of xs, in reverse order`, `every second
letter of s`), whose asserts never all expect one value:

    >>> p = procedural_code_problem("train", 0)
    >>> p.entry_point, p.source
    ('f', 'procedural')

Train / held-out. A task *spec* is a family plus its parameters (`add 3`). Held-out instances use
only held-out specs: about a quarter of each parameterised family's parameter values (always at
least one, never all), chosen by a hash of the spec, so held-out evaluation asks for `x plus 7`
when training saw `x plus 3` and `x times 7`, never the very same function. Families without
parameters (`max`, `reverse`, ...) are training-only. Instance seeds come from disjoint ranges
(`teamrl.tasks.base.split_seed`), so held-out test inputs are drawn independently too.

Mutants. `mutate_program` makes single-site mutants of a reference solution (an operator swapped,
a constant moved by one, min/max swapped, a return value dropped, ...): the known-wrong programs a
unit-test writer is rewarded for catching. Callers keep only mutants that fail the ground-truth
tests, which removes the equivalent ones.
"""

from __future__ import annotations

import ast
import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from teamrl.tasks.base import split_seed
from teamrl.tasks.code_data import CodeProblem

__all__ = ["FAMILIES", "TaskSpec", "mutate_program", "procedural_code_problem", "procedural_code_problems", "specs"]


@dataclass(frozen=True)
class TaskSpec:
    """One function to write: `family` with `params`, e.g. ("affine", (2, 5)) for x*2+5."""

    family: str
    params: tuple[int, ...]
    args: str  # "x", "a, b" or "s"
    phrase: str  # what f returns, in words: "x plus 3"
    body: str  # the reference's return expression
    func: Callable[..., Any]  # the same function, to compute expected outputs on the host

    @property
    def key(self) -> str:
        return f"{self.family}:{','.join(map(str, self.params))}"

    @property
    def short(self) -> str:
        """The compact task line a tiny model sees: `f(x): x plus 3`."""
        return f"f({self.args.replace(' ', '')}): {self.phrase}"


def _param_family(
    name: str, values: Sequence[int], phrase: str, body: str, func: Callable[..., Any], args: str = "x"
) -> list[TaskSpec]:
    """One spec per parameter value k: `phrase` and `body` formatted with k, `func(*arguments, k)`."""
    return [
        TaskSpec(name, (k,), args, phrase.format(k=k), body.format(k=k), (lambda *a, k=k: func(*a, k))) for k in values
    ]


def _all_specs() -> list[TaskSpec]:
    out = (
        _param_family("add", range(1, 10), "x plus {k}", "x+{k}", lambda x, k: x + k)
        + _param_family("sub", range(1, 10), "x minus {k}", "x-{k}", lambda x, k: x - k)
        + _param_family("mul", range(2, 10), "x times {k}", "x*{k}", lambda x, k: x * k)
        + _param_family("mod", range(2, 10), "x mod {k}", "x%{k}", lambda x, k: x % k)
    )
    out += [
        TaskSpec("affine", (a, b), "x", f"x times {a} plus {b}", f"x*{a}+{b}", (lambda x, a=a, b=b: x * a + b))
        for a in range(2, 6)
        for b in range(1, 10)
    ]
    out += [
        TaskSpec("max", (), "a, b", "the larger of a and b", "max(a, b)", max),
        TaskSpec("min", (), "a, b", "the smaller of a and b", "min(a, b)", min),
        TaskSpec("abs", (), "x", "the absolute value of x", "x if x >= 0 else -x", abs),
        TaskSpec("square", (), "x", "x squared", "x*x", lambda x: x * x),
        TaskSpec("reverse", (), "s", "s reversed", "s[::-1]", lambda s: s[::-1]),
        TaskSpec("upper", (), "s", "s in upper case", "s.upper()", str.upper),
        TaskSpec("double", (), "s", "s twice", "s+s", lambda s: s + s),
        TaskSpec("first", (), "s", "the first letter of s", "s[0]", lambda s: s[0]),
        TaskSpec("last", (), "s", "the last letter of s", "s[-1]", lambda s: s[-1]),
        TaskSpec("len", (), "s", "the length of s", "len(s)", len),
    ]
    return out + _list_specs()


def _list_specs() -> list[TaskSpec]:
    """The harder level: lists and strings with a parameter, each a comprehension, a slice or a loop
    (drawn only when named: `procedural:lists`, or the family names in `LIST_FAMILIES`)."""

    return (
        _param_family(
            "count_gt",
            range(0, 10),
            "the number of elements of xs greater than {k}",
            "sum(1 for v in xs if v > {k})",
            lambda xs, k: sum(1 for v in xs if v > k),
            "xs",
        )
        + _param_family(
            "keep_div",
            range(2, 7),
            "the elements of xs divisible by {k}, in order",
            "[v for v in xs if v % {k} == 0]",
            lambda xs, k: [v for v in xs if v % k == 0],
            "xs",
        )
        + _param_family(
            "sum_times",
            range(2, 10),
            "the sum of the elements of xs, times {k}",
            "sum(xs)*{k}",
            lambda xs, k: sum(xs) * k,
            "xs",
        )
        + _param_family(
            "add_each",
            range(1, 10),
            "xs with {k} added to every element",
            "[v+{k} for v in xs]",
            lambda xs, k: [v + k for v in xs],
            "xs",
        )
        + _param_family(
            "first_rev",
            range(2, 5),
            "the first {k} elements of xs, in reverse order",
            "xs[:{k}][::-1]",
            lambda xs, k: xs[:k][::-1],
            "xs",
        )
        + _param_family("repeat", range(2, 6), "s repeated {k} times", "s*{k}", lambda s, k: s * k, "s")
        + _param_family("drop", range(1, 4), "s without its first {k} letters", "s[{k}:]", lambda s, k: s[k:], "s")
        + [
            TaskSpec(
                "every",
                (k,),
                "s",
                f"every {word} letter of s, starting with the first",
                f"s[::{k}]",
                (lambda s, k=k: s[::k]),
            )
            for k, word in ((2, "second"), (3, "third"))
        ]
    )


_SPECS = _all_specs()
FAMILIES = tuple(dict.fromkeys(s.family for s in _SPECS))
LIST_FAMILIES = ("count_gt", "keep_div", "sum_times", "add_each", "first_rev", "repeat", "drop", "every")
"""The harder level (`procedural:lists`): chosen by name only, so `procedural` alone draws what it always drew."""
BASE_FAMILIES = tuple(f for f in FAMILIES if f not in LIST_FAMILIES)
_HELD_OUT_SHARE = 4  # one parameter value in four (at least one) is held out


def _held_out_keys() -> frozenset[str]:
    held: set[str] = set()
    for family in FAMILIES:
        members = [s for s in _SPECS if s.family == family]
        if not members[0].params:
            continue  # a single-spec family cannot be split: it is training-only
        # A stable hash, not Python's salted hash(): the split must be the same in every process.
        ranked = sorted(members, key=lambda s: hashlib.sha256(f"teamrl-code|{s.key}".encode()).hexdigest())
        held.update(s.key for s in ranked[: max(1, len(members) // _HELD_OUT_SHARE)])
    return frozenset(held)


_HELD_OUT = _held_out_keys()


def specs(split: str, families: Sequence[str] | None = None) -> list[TaskSpec]:
    """The task specs of `split` ('train' or 'heldout'), optionally only of some `families`."""
    if split not in ("train", "heldout"):
        raise ValueError(f"unknown split {split!r}: use 'train' or 'heldout'")
    if families is not None and "lists" in families:
        families = [*(f for f in families if f != "lists"), *LIST_FAMILIES]
    unknown = set(families or ()) - set(FAMILIES)
    if unknown:
        raise ValueError(f"unknown task families {sorted(unknown)}; known: {', '.join(FAMILIES)} (or lists)")
    wanted = BASE_FAMILIES if families is None else families
    chosen = [s for s in _SPECS if (s.key in _HELD_OUT) == (split == "heldout") and s.family in wanted]
    if not chosen:
        raise ValueError(
            f"no {split} specs in families {list(families or FAMILIES)} (families without parameters are training-only)"
        )
    return chosen


def _inputs(spec: TaskSpec, rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """n distinct argument tuples; negatives where they tell implementations apart (abs, max)."""
    seen: list[tuple[Any, ...]] = []
    while len(seen) < n:
        if spec.args == "s":
            length = rng.randint(1, 5)
            args: tuple[Any, ...] = ("".join(rng.choice("abcdefghij") for _ in range(length)),)
        elif spec.args == "xs":
            args = ([rng.randint(-9, 20) for _ in range(rng.randint(2, 6))],)
        elif spec.args == "a, b":
            args = (rng.randint(-9, 20), rng.randint(-9, 20))
        elif spec.family == "mod":
            args = (rng.randint(0, 30),)
        else:
            args = (rng.randint(-9, 20),)
        if args not in seen:
            seen.append(args)
    if spec.family == "abs" and all(a[0] >= 0 for a in seen):
        seen[-1] = (-rng.randint(1, 9),)  # an abs test without a negative input proves nothing
    return seen


def procedural_code_problem(
    split: str, index: int, seed: int = 0, families: Sequence[str] | None = None
) -> CodeProblem:
    """Instance `index` of `split`: a function task with its reference solution and 3-5 asserts."""
    instance_seed = split_seed(split, index)
    rng = random.Random(f"teamrl-code:{seed}:{instance_seed}")
    spec = rng.choice(specs(split, families))
    calls = _inputs(spec, rng, rng.randint(3, 5))
    while spec.family in LIST_FAMILIES and len({repr(spec.func(*args)) for args in calls}) < 2:
        # a program that returns one constant (`return []`) must fail some assert (the base families'
        # draws are left as they were, so their instances do not change)
        calls = _inputs(spec, rng, len(calls))
    tests = "\n".join(f"assert f({', '.join(map(repr, args))}) == {spec.func(*args)!r}" for args in calls)
    return CodeProblem(
        id=f"procedural/{split}/{index}",
        prompt=f'def f({spec.args}):\n    """Return {spec.phrase}."""\n',
        reference_solution=f"def f({spec.args}):\n    return {spec.body}\n",
        tests=tests + "\n",
        entry_point="f",
        source="procedural",
        metadata={
            "family": spec.family,
            "params": list(spec.params),
            "spec": spec.key,
            "short": spec.short,
            "split": split,
        },
    )


def procedural_code_problems(
    split: str, n: int, seed: int = 0, families: Sequence[str] | None = None
) -> list[CodeProblem]:
    """Instances 0..n-1 of `split` (see `procedural_code_problem`)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [procedural_code_problem(split, i, seed, families) for i in range(n)]


# ----------------------------------------------------------------------------- mutants

_BINOP_SWAPS = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
}
_ORDERED_OPS = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)  # swapping operands changes these
_CMP_SWAPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_CMP_FLIPS = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}
_NAME_SWAPS = {
    "min": "max",
    "max": "min",
    "any": "all",
    "all": "any",
    "True": "False",
    "False": "True",
    "sorted": "reversed",
    "reversed": "sorted",
    "set": "list",
    "list": "set",
    "int": "float",
    "float": "int",
}
_ATTR_SWAPS = {
    "upper": "lower",
    "lower": "upper",
    "append": "remove",
    "startswith": "endswith",
    "endswith": "startswith",
    "index": "count",
    "swapcase": "upper",
    "isupper": "islower",
    "islower": "isupper",
    "isdigit": "isalpha",
    "isalpha": "isdigit",
    "strip": "lstrip",
    "keys": "values",
    "values": "keys",
}

Edit = Callable[[ast.AST], None]


def _swap_operands(node: Any) -> None:
    node.left, node.right = node.right, node.left


def _negate(field: str) -> Edit:
    return lambda n: setattr(n, field, ast.UnaryOp(ast.Not(), getattr(n, field)))


def _replace_comparison(table: dict[type[ast.cmpop], type[ast.cmpop]]) -> Edit:
    """An edit replacing the first comparison operator of a Compare node by its entry in `table`."""

    def edit(n: ast.AST) -> None:
        assert isinstance(n, ast.Compare)  # applied to the same node, a Compare, of a fresh parse
        n.ops[0] = table[type(n.ops[0])]()

    return edit


def _edits(node: ast.AST) -> list[Edit]:
    """In-place single-site changes to `node` (applied to the same node of a fresh parse)."""

    def set_attr(name: str, value: Any) -> Edit:
        return lambda n: setattr(n, name, value)

    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BINOP_SWAPS:
        edits = [set_attr("op", _BINOP_SWAPS[type(node.op)]())]
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ORDERED_OPS):
            edits.append(_swap_operands)
        return edits
    if isinstance(node, ast.Compare) and type(node.ops[0]) in _CMP_SWAPS:
        edits = [_replace_comparison(_CMP_SWAPS)]
        if type(node.ops[0]) in _CMP_FLIPS:  # the boundary swap alone is often equivalent
            edits.append(_replace_comparison(_CMP_FLIPS))
        return edits
    if isinstance(node, ast.BoolOp):
        return [set_attr("op", ast.Or() if isinstance(node.op, ast.And) else ast.And())]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        # `+x` keeps x's value (and truth), so this drops the negation without needing the parent.
        return [set_attr("op", ast.UAdd())]
    if isinstance(node, (ast.If, ast.IfExp)):
        return [_negate("test")]
    if isinstance(node, ast.comprehension) and node.ifs:
        return [lambda n: n.ifs.__setitem__(0, ast.UnaryOp(ast.Not(), n.ifs[0]))]
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return [set_attr("value", not node.value)]
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return [set_attr("value", node.value + 1), set_attr("value", node.value - 1)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [set_attr("value", node.value + "_" if node.value else " ")]
    if isinstance(node, ast.Name) and node.id in _NAME_SWAPS:
        return [set_attr("id", _NAME_SWAPS[node.id])]
    if isinstance(node, ast.Attribute) and node.attr in _ATTR_SWAPS:
        return [set_attr("attr", _ATTR_SWAPS[node.attr])]
    if isinstance(node, ast.Return) and node.value is not None:
        return [set_attr("value", ast.Constant(None))]
    return []


def _scope(tree: ast.Module, entry_point: str | None) -> ast.AST:
    """The entry point's definition (helpers the tests import from the prompt stay intact)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == entry_point:
            return node
    return tree


def mutate_program(source: str, entry_point: str | None = None, limit: int = 8, seed: int | str = 0) -> list[str]:
    """Up to `limit` distinct single-site mutants of `source`, in a seeded random order.

    Only the body of `entry_point` is mutated (the whole module when it is None or not found).
    Mutants differ from the source's normalised text but may still be equivalent to it; filter
    them with the ground-truth tests. A source that does not parse has no mutants.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    scope = _scope(tree, entry_point)
    # Editing a docstring changes nothing the tests can see: not a site.
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(scope)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    sites = [
        (i, j) for i, node in enumerate(ast.walk(scope)) if id(node) not in docstrings for j in range(len(_edits(node)))
    ]
    random.Random(f"teamrl-mutants:{seed}").shuffle(sites)
    original = ast.unparse(tree)
    mutants: list[str] = []
    for i, j in sites:
        if len(mutants) >= limit:
            break
        fresh = ast.parse(source)  # a fresh tree per mutant keeps each one single-site
        node = next(n for k, n in enumerate(ast.walk(_scope(fresh, entry_point))) if k == i)
        _edits(node)[j](node)
        try:
            text = ast.unparse(ast.fix_missing_locations(fresh))
        except Exception:  # noqa: BLE001 - an edit unparse cannot print is just skipped
            continue
        if text != original and text + "\n" not in mutants:
            mutants.append(text + "\n")
    return mutants
