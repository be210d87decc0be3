"""What the code team's agents write, read tolerantly: the coder's program and the tester's asserts."""

from __future__ import annotations

import ast
import textwrap
import warnings

from teamrl.tasks.code_data import CodeProblem
from teamrl.tasks.code_blocks import code_blocks, extract_code_block, parse_python

Steps = tuple[tuple[str, bool], ...]  # (statement source, is an assert unit), in order


def shown_signature(problem: CodeProblem) -> str | None:
    """`def name(args):` of an MBPP problem's reference: its prompt is prose, so the agents are
    shown this line instead of a ground-truth assert (None for other problems)."""
    if not problem.source.startswith("mbpp"):
        return None
    try:
        for node in ast.walk(ast.parse(problem.reference_solution)):
            if isinstance(node, ast.FunctionDef) and node.name == problem.entry_point:
                return f"def {node.name}({ast.unparse(node.args)}):"
    except (SyntaxError, ValueError, RecursionError):
        pass
    return None


def visible_prompt(problem: CodeProblem) -> str:
    """The task as the agents see it. MBPP prompts quote a ground-truth assert to show the
    signature; it is replaced by the reference's `def` line so no ground-truth test is shown."""
    if not problem.source.startswith("mbpp"):
        return problem.prompt
    text = problem.prompt.split("\nYour code should pass tests like this:", 1)[0]
    signature = shown_signature(problem)
    if signature:
        return f"{text}\nWrite it as: {signature}"
    return f"{text}\nName the function {problem.entry_point}." if problem.entry_point else text


# ----------------------------------------------------------------------------- the coder's program

# What `ast.parse` raises on text a model wrote: SyntaxError (IndentationError too), ValueError
# (null bytes), RecursionError / MemoryError (absurd nesting), OverflowError (huge literals).
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
# Fenced blocks tried as a body completing the prompt, best first: each try parses the prompt
# again, so this bounds the work per response (a block as a whole program costs only itself).
MAX_BODY_BLOCKS = 4
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _parse(code: str) -> ast.Module | None:
    try:
        return parse_python(code)
    except PARSE_ERRORS:
        return None


def _compiles(program: str) -> bool:
    """Whether the program compiles, not only parses: `ast.parse` accepts a `return` (or `break`,
    `nonlocal`) outside any function, which is a body, not a program."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        try:
            compile(program, "<response>", "exec", dont_inherit=True)
        except PARSE_ERRORS:
            return False
    return True


def _is_main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":`: its body does not run when the program is graded."""
    return isinstance(node, ast.If) and any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(node.test))


def _binds(stmts: list[ast.stmt], name: str) -> bool:
    """Whether running `stmts` as a module binds `name` at its top level: a def, class,
    assignment or import, also inside top-level if/try/with blocks (not a `__main__` guard)."""
    todo = list(stmts)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        for target in targets:
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (alias.asname or alias.name.split(".")[0]) == name for alias in node.names
        ):
            return True
        if isinstance(node, ast.If) and not _is_main_guard(node):
            todo += node.body + node.orelse
        elif isinstance(node, (ast.Try, ast.With)):
            todo += node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            todo += [st for handler in getattr(node, "handlers", []) for st in handler.body]
    return False


def _returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the function's own body (not a nested def, class or lambda) returns or yields."""
    todo: list[ast.AST] = [st for st in function.body if not isinstance(st, _SCOPES)]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
            return True
        todo += [kid for kid in ast.iter_child_nodes(node) if not isinstance(kid, _SCOPES)]
    return False


def program_context(problem: CodeProblem) -> str:
    """The task's prompt when it is code that declares the entry point (HumanEval: imports, helper
    functions, the signature and docstring), else "". A program is run after it, as the official
    HumanEval harness runs prompt + completion, so the prompt's imports and helpers are defined."""
    if not problem.entry_point or not problem.prompt.strip():
        return ""
    tree = _parse(problem.prompt)
    return problem.prompt if tree is not None and _binds(tree.body, problem.entry_point) else ""


def _body_indent(context: str, entry: str) -> str:
    """The indentation of the entry point's body in the prompt (its docstring line), else 4 spaces."""
    tree = _parse(context)
    node = (
        next(
            (
                n
                for n in reversed(tree.body)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry
            ),
            None,
        )
        if tree
        else None
    )
    if node is not None and node.body:
        line = context.splitlines()[node.body[0].lineno - 1]
        indent = line[: len(line) - len(line.lstrip())]
        if indent:
            return indent
    return "    "


def _body_variants(code: str, indent: str) -> list[str]:
    """Ways a body may be laid out: as written (already indented, with any column-0 code after
    it staying top level), re-indented, and with a first line whose indentation was stripped
    (by a fence's `strip()`), given back as the last line's or the least indentation of the rest."""
    lines = code.splitlines()
    if not lines:
        return []
    indented = lines[0][:1] in (" ", "\t")
    variants = [code] if indented else []
    variants.append(textwrap.indent(textwrap.dedent(code), indent))
    rest = [line for line in lines[1:] if line.strip()]
    if not indented and rest:
        prefixes = [
            rest[-1][: len(rest[-1]) - len(rest[-1].lstrip())],
            " " * min(len(line) - len(line.lstrip()) for line in rest),
        ]
        for prefix in filter(None, prefixes):
            variants += [prefix + code, textwrap.indent(textwrap.dedent(prefix + code), indent)]
    if "\t" in code:  # a tab-indented body under a space-indented signature (last: tabs in strings change)
        variants.append(textwrap.indent(textwrap.dedent(code.expandtabs(4)), indent))
    return list(dict.fromkeys(variants))


def _after_context(code: str, tree: ast.Module, context: str) -> str:
    """`code` run after the prompt, with its `from __future__` imports moved first (they must
    open the file); the code alone if the two still do not compile together."""
    future = [st for st in tree.body if isinstance(st, ast.ImportFrom) and st.module == "__future__"]
    lines = code.splitlines(keepends=True)
    dropped = {i for st in future for i in range(st.lineno - 1, (st.end_lineno or st.lineno))}
    head = "".join(lines[i] for i in sorted(dropped))
    rest = "".join(line for i, line in enumerate(lines) if i not in dropped)
    program = (head.rstrip("\n") + "\n" if head else "") + context.rstrip() + "\n\n\n" + rest.strip("\n") + "\n"
    return program if _compiles(program) else code + "\n"


def _as_program(code: str, problem: CodeProblem, context: str, head: str, as_body: bool = True) -> str | None:
    """The program `code` stands for, or None: a whole program binding the entry point (run after
    `context`, the prompt when it is code), else (if `as_body`) a body completing `head`, the
    prompt's signature (the prompt itself when it is code, else the signature shown for MBPP)."""
    entry = problem.entry_point
    tree = _parse(code)
    if tree is not None and (_binds(tree.body, entry) if entry else bool(tree.body)) and _compiles(code):
        # At most one prompt + program compile per response: this block is the program either way.
        return _after_context(code.strip("\n"), tree, context) if context else code.strip("\n") + "\n"
    if not (as_body and head and entry):
        return None
    for body in _body_variants(code.strip("\n"), _body_indent(head, entry)):
        completed = head.rstrip() + "\n" + body.rstrip() + "\n"
        tree = _parse(completed)
        functions = (
            [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry]
            if tree
            else []
        )
        # The entry point that runs (the last one) must return something: a bare word or a body
        # with no return is stray text that happens to parse, not a solution.
        if functions and _returns(functions[-1]) and _compiles(completed):
            return completed
    return None


def parse_program(text: str, problem: CodeProblem) -> tuple[str, bool]:
    """(program, well formed) of a coder response; see docs/verifiers/code.md.

    The code is the best fenced block that makes a program (python-tagged blocks, then untagged,
    then other tags, the last written first), else the whole response when it has no fence. A
    program is either the code itself, when it binds the entry point (def, class, assignment or
    import), or the prompt completed by the code as the entry point's body (HumanEval completion
    style, nested helper defs included; for MBPP the shown `def` line; tried for the
    `MAX_BODY_BLOCKS` best blocks) when that body returns. Not well formed: ("", False) without
    code, else (the best block, False): it is not graded. Linear in the response's length.
    """
    if not isinstance(text, str) or not text.strip():
        return "", False
    fenced = code_blocks(text)
    # Unfenced: the whole response is the code (a body's leading indentation kept).
    candidates = fenced or [text.rstrip().lstrip("\n")]
    context = program_context(problem)
    head = context or shown_signature(problem) or ""
    for rank, code in enumerate(candidates):
        program = _as_program(code, problem, context, head, as_body=rank < MAX_BODY_BLOCKS)
        if program is not None:
            return program, True
    # Shown to the team next turn so that it can be fixed; prose without a fence is not code.
    shown = candidates[0].strip("\n")
    return (shown + "\n", False) if fenced or _parse(shown) is not None else ("", False)


# ----------------------------------------------------------------------------- the tester's tests


def _statements(code: str) -> tuple[list[ast.stmt], bool]:
    """Top-level statements; when the whole block does not parse, the lines that do (salvaged)."""
    tree = _parse(code)
    if tree is not None:
        return tree.body, True
    salvaged: list[ast.stmt] = []
    for line in code.splitlines():
        line_tree = _parse(line.strip())
        salvaged += line_tree.body if line_tree is not None else []
    return salvaged, False


def _unroll(stmts: list[ast.stmt], entry_point: str | None) -> list[ast.stmt]:
    """Lift `if __name__ == "__main__":` bodies and a `check(candidate)` body to the top level."""
    out: list[ast.stmt] = []
    for st in stmts:
        if isinstance(st, ast.If) and "__name__" in ast.unparse(st.test):
            out += _unroll(st.body, entry_point)
        elif isinstance(st, ast.FunctionDef) and st.name == "check" and entry_point and st.args.args:
            out.append(ast.parse(f"{st.args.args[0].arg} = {entry_point}").body[0])
            out += st.body
        elif not (
            isinstance(st, ast.Expr)
            and isinstance(st.value, ast.Call)
            and isinstance(st.value.func, ast.Name)
            and st.value.func.id == "check"
        ):
            out.append(st)
    return out


# Handlers that would also catch the AssertionError of a failing assert (or everything).
_BROAD = frozenset({"Exception", "BaseException", "AssertionError"})


def _swallows(node: ast.AST) -> bool:
    """Whether `node` contains a try that catches everything (or assertion failures) or a
    `suppress(...)` context: a test inside it can never fail."""
    for n in ast.walk(node):
        if isinstance(n, (ast.Try, ast.TryStar)):
            for handler in n.handlers:
                kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
                if handler.type is None or any(
                    (k.id if isinstance(k, ast.Name) else getattr(k, "attr", None)) in _BROAD for k in kinds
                ):
                    return True
        if isinstance(n, (ast.With, ast.AsyncWith)):
            for item in n.items:
                func = item.context_expr.func if isinstance(item.context_expr, ast.Call) else None
                if (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) == "suppress":
                    return True
    return False


_NEGATED_OPS = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
}


def _negation(test: ast.expr) -> str | None:
    """The dump of the expression that is `test`'s complement: `not X` for X, `a is not b` for `a is b`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.dump(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _NEGATED_OPS:
        return ast.dump(ast.Compare(test.left, [_NEGATED_OPS[type(test.ops[0])]()], test.comparators))
    return None


def _tautology(test: ast.expr) -> bool:
    """`a == a` / `a is a` / `a <= a` with the same expression on both sides, `... or <true constant>`,
    or `X or <not X>` (`f(0) is None or f(0) is not None`: true whatever f returns; the
    reward-hacking probe found it paid for mutants that merely crash)."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Eq, ast.Is, ast.LtE, ast.GtE))
    ):
        return ast.dump(test.left) == ast.dump(test.comparators[0])
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        if any(isinstance(v, ast.Constant) and bool(v.value) for v in test.values):
            return True
        dumps = {ast.dump(v) for v in test.values}
        return any(_negation(v) in dumps for v in test.values)
    return False


def counts_as_unit(st: ast.stmt, callees: set[str] | None) -> bool:
    """Whether a top-level test statement is a unit: it contains an assert, calls the function
    under test (a name in `callees`; any call when None), cannot swallow its own failure and is not
    a tautology. Other statements run as helpers, whose failures do not count."""
    if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    asserts = [n for n in ast.walk(st) if isinstance(n, ast.Assert)]
    if not asserts or _swallows(st) or all(_tautology(a.test) for a in asserts):
        return False
    calls = [n for n in ast.walk(st) if isinstance(n, ast.Call)]
    return any(callees is None or (isinstance(c.func, ast.Name) and c.func.id in callees) for c in calls)


def _aliases(st: ast.stmt, callees: set[str]) -> set[str]:
    """Names that `st` binds to the function under test (`candidate = f` from an unrolled check)."""
    if isinstance(st, ast.Assign) and isinstance(st.value, ast.Name) and st.value.id in callees:
        return {t.id for t in st.targets if isinstance(t, ast.Name)}
    return set()


def parse_tests(text: str, entry_point: str | None = None, max_units: int = 10) -> tuple[Steps, bool]:
    """(steps, well formed) of a tester response; see docs/verifiers/code.md.

    A unit is a top-level statement that `counts_as_unit` (an assert that calls the entry point,
    or an alias such as check's `candidate`); other statements (imports, helpers, asserts that do
    not test the function) run in order between them as helpers. Units beyond `max_units` are
    dropped. Well formed: the block parses and has at least one unit.
    """
    if not isinstance(text, str):
        return (), False
    # Unfenced text that does not parse as a whole still gets its parseable lines salvaged.
    code = extract_code_block(text) or text
    stmts, parsed = _statements(code)
    steps: list[tuple[str, bool]] = []
    units = 0
    callees = {entry_point} if entry_point else None
    try:
        for st in _unroll(stmts, entry_point):
            is_unit = counts_as_unit(st, callees)
            if is_unit and units == max_units:
                break
            if callees is not None:
                # Tests that define their own `f` call it, not the program, from then on.
                callees = {name for name in callees if not _binds([st], name)} | _aliases(st, callees)
            steps.append((ast.unparse(st), is_unit))
            units += is_unit
    except (RecursionError, ValueError, MemoryError):
        return (), False
    return tuple(steps), parsed and units > 0
