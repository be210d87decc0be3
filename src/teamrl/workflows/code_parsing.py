"""What the code team's agents write, read tolerantly: the coder's program and the tester's asserts."""

from __future__ import annotations

import ast
import re
import textwrap

from teamrl.tasks.code_data import CodeProblem
from teamrl.tasks.parsing import extract_code_block, parse_python

Steps = tuple[tuple[str, bool], ...]  # (statement source, is an assert unit), in order


def visible_prompt(problem: CodeProblem) -> str:
    """The task as the agents see it. MBPP prompts quote a ground-truth assert to show the
    signature; it is replaced by the reference's `def` line so no ground-truth test is shown."""
    if not problem.source.startswith("mbpp"):
        return problem.prompt
    text = problem.prompt.split("\nYour code should pass tests like this:", 1)[0]
    try:
        for node in ast.walk(ast.parse(problem.reference_solution)):
            if isinstance(node, ast.FunctionDef) and node.name == problem.entry_point:
                return f"{text}\nWrite it as: def {node.name}({ast.unparse(node.args)}):"
    except (SyntaxError, ValueError):
        pass
    return f"{text}\nName the function {problem.entry_point}." if problem.entry_point else text


# ----------------------------------------------------------------------------- parsing responses


def _defines(code: str, name: str | None) -> bool:
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if name is None:
        return bool(tree.body)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def parse_program(text: str, problem: CodeProblem) -> tuple[str, bool]:
    """(program, well formed): the response's code if it defines the entry point; else, for a
    response that continues the prompt's signature (HumanEval style), the prompt plus that body."""
    code = extract_code_block(text) if isinstance(text, str) else None
    if code and _defines(code, problem.entry_point):
        return code + "\n", True
    body = textwrap.dedent(code or (text if isinstance(text, str) else "")).strip("\n")
    if problem.entry_point and body.strip() and not re.match(r"(async\s+)?(def|class)\s", body):
        completed = problem.prompt.rstrip() + "\n" + textwrap.indent(body, "    ") + "\n"
        # A body that never returns is more likely stray text that happens to parse (a bare name).
        if _defines(completed, problem.entry_point) and re.search(r"\b(return|yield)\b", body):
            return completed, True
    return (code + "\n", False) if code else ("", False)


def _statements(code: str) -> tuple[list[ast.stmt], bool]:
    """Top-level statements; when the whole block does not parse, the lines that do (salvaged)."""
    try:
        return parse_python(code).body, True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    salvaged: list[ast.stmt] = []
    for line in code.splitlines():
        try:
            salvaged += parse_python(line.strip()).body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
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
        elif not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)
                  and isinstance(st.value.func, ast.Name) and st.value.func.id == "check"):
            out.append(st)
    return out


def parse_tests(text: str, entry_point: str | None = None, max_units: int = 10) -> tuple[Steps, bool]:
    """(steps, well formed) of a tester response. A unit is a top-level statement containing an
    `assert`; other statements (imports, helpers) run in order between them. Units beyond
    `max_units` are dropped. Well formed: the block parses and has at least one unit."""
    if not isinstance(text, str):
        return (), False
    # Unfenced text that does not parse as a whole still gets its parseable lines salvaged.
    code = extract_code_block(text) or text
    stmts, parsed = _statements(code)
    steps: list[tuple[str, bool]] = []
    units = 0
    try:
        for st in _unroll(stmts, entry_point):
            nested = isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            is_unit = not nested and any(isinstance(n, ast.Assert) for n in ast.walk(st))
            if is_unit and units == max_units:
                break
            steps.append((ast.unparse(st), is_unit))
            units += is_unit
    except (RecursionError, ValueError):
        return (), False
    return tuple(steps), parsed and units > 0
