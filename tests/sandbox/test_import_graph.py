"""The sandbox package's modules import one another without a circle, function-level imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import teamrl.sandbox

PACKAGE = Path(teamrl.sandbox.__file__).parent


def sibling_imports(path: Path) -> set[str]:
    """The sandbox modules `path` imports (relative or absolute, at any depth of the file)."""
    names = {p.stem for p in PACKAGE.glob("*.py")}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found |= {alias.name for alias in node.names}
            elif node.module and node.module.startswith("teamrl.sandbox."):
                found.add(node.module.split(".")[2])
            elif node.module == "teamrl.sandbox":
                found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("teamrl.sandbox.")}
    return (found & names) - {path.stem, "__init__"}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import path that leads from a module back to itself (one per circle's smallest member)."""
    found = []
    for start in sorted(graph):
        todo = [(start, [start])]
        seen: set[str] = set()
        while todo:
            node, path = todo.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start and start == min(path):
                    found.append(path + [start])
                elif nxt not in seen and nxt > start:
                    seen.add(nxt)
                    todo.append((nxt, path + [nxt]))
    return found


def test_no_import_circle_in_the_sandbox_package():
    graph = {p.stem: sibling_imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert graph.get("isolation"), "the graph was not read"
    assert circles(graph) == []


def test_the_system_call_layer_is_the_bottom():
    assert sibling_imports(PACKAGE / "linux.py") == set()
    for name in ("pidns", "rootfs", "syscall_filter"):
        assert "isolation" not in sibling_imports(PACKAGE / f"{name}.py"), name


def test_circles_are_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
