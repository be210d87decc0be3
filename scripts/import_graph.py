"""The import graph of src/teamrl: import circles, imports that go up the layer order, largest modules.

    python scripts/import_graph.py [--source src/teamrl] [--closure teamrl.gateway.serve]

An edge A -> B means module A imports teamrl module B anywhere in its file (module level or inside a
function: a function-level import still ties A to B). A circle is a strongly connected component of
more than one module. A folder is a first-level package of teamrl (`rollout`, `training`, ...); the
package `teamrl` itself and `teamrl.cli` are folders of their own. `LAYERS` orders the folders from
bottom to top: a module may import modules of its own folder and of folders in lower layers only
(two folders of one layer do not import each other). tests/test_layers.py holds the code to it.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "teamrl"

# Bottom to top; the folders of one layer are peers. docs: /architecture layering.
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(layer) for layer in (
    {"algorithms", "sandbox"},           # pure math; process isolation
    {"tasks"},                           # environments and verifiers
    {"workflows"},                       # roles, turns, prompts, parsing, local rewards
    {"demos"},                           # scripted agents over the workflows; the task registry
    {"config"},                          # typed sections, validated where declared
    {"policies"},                        # loading, role -> policy mapping, LoRA, scoring
    {"rollout"},                         # engines, tree sampling driver, held-out evaluation
    {"setup"},                           # config -> a loaded team (models, warm-up, workflow)
    {"diagnostics"},                     # per-role metrics and alerts
    {"training"},                        # the loop, the update, checkpoints, resume, backends
    {"report"},                          # pages and plots of run directories
    {"probes", "study", "gateway"},      # users of a loaded team or of run directories
    {"api"},                             # the Python API (teamrl/api.py): load, train, evaluate, a loaded team
    {"teamrl"},                          # teamrl/__init__: the API's names, imported on first use
    {"cli"},                             # the command line: parse, call, print
))


@dataclass(frozen=True)
class Graph:
    """Modules by dotted name (a package by its own name) and the teamrl modules each imports."""

    files: dict[str, Path]
    edges: dict[str, frozenset[str]]

    def module_of(self, name: str) -> str | None:
        """The module that defines `name` (`teamrl.a.b.func` -> `teamrl.a.b`), None outside teamrl."""
        while name and name not in self.files:
            name = name.rpartition(".")[0]
        return name or None

    def closure(self, start: str) -> set[str]:
        """Every module `start` imports, directly or through others (itself excluded)."""
        seen, todo = set(), [start]
        while todo:
            for target in self.edges[todo.pop()]:
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        seen.discard(start)
        return seen


def module_name(path: Path, source: Path) -> str:
    parts = path.relative_to(source.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def load_graph(source: Path = SOURCE) -> Graph:
    files = {module_name(p, source): p for p in sorted(source.rglob("*.py"))}
    known = Graph(files, {}).module_of
    edges: dict[str, frozenset[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names if alias.name.startswith("teamrl"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                if base == "teamrl" or base.startswith("teamrl."):
                    # `from pkg import sub` imports the submodule; `from mod import func` the module
                    targets.update(known(f"{base}.{a.name}") if f"{base}.{a.name}" in files else known(base)
                                   for a in node.names)
        edges[name] = frozenset(t for t in targets if t and t != name)
    return Graph(files, edges)


def circles(graph: Graph) -> list[list[str]]:
    """Strongly connected components of more than one module, each sorted (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph.edges:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.edges[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def folder(module: str) -> str:
    """`teamrl.rollout.tree` -> `rollout`; the package `teamrl` -> `teamrl`; `teamrl.cli` -> `cli`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(name: str) -> int:
    for rank, layer in enumerate(LAYERS):
        if name in layer:
            return rank
    raise KeyError(f"folder {name!r} is in no layer of scripts/import_graph.py LAYERS; add it where it belongs")


def upward_imports(graph: Graph) -> list[tuple[str, str]]:
    """(importer, imported) for each import of a folder that is not below the importer's folder."""
    bad = []
    for source, targets in graph.edges.items():
        for target in targets:
            a, b = folder(source), folder(target)
            if a != b and layer_of(b) >= layer_of(a):
                bad.append((source, target))
    return sorted(bad)


def largest(graph: Graph, count: int = 5) -> list[tuple[int, str]]:
    sizes = ((len(path.read_text().splitlines()), name) for name, path in graph.files.items())
    return sorted(sizes, reverse=True)[:count]


def short(names: Iterable[str]) -> list[str]:
    return [n.removeprefix("teamrl.") for n in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=SOURCE, help="the teamrl package folder")
    parser.add_argument("--closure", action="append", default=[], metavar="MODULE",
                        help="also list the teamrl modules MODULE pulls in, by folder (repeatable)")
    args = parser.parse_args(argv)
    graph = load_graph(args.source)
    print(f"modules {len(graph.files)}, imports {sum(len(t) for t in graph.edges.values())}")
    found = circles(graph)
    print(f"circles: {len(found)}")
    for component in found:
        print("   " + " <-> ".join(short(component)))
    upward = upward_imports(graph)
    print(f"upward imports: {len(upward)}")
    for source, target in upward:
        print(f"   {source.removeprefix('teamrl.')} -> {target.removeprefix('teamrl.')}")
    print("largest modules:")
    for lines, name in largest(graph):
        print(f"   {lines:5d} {name.removeprefix('teamrl.')}")
    for start in args.closure:
        pulled = sorted(graph.closure(start))
        print(f"{start} pulls in {len(pulled)} modules; from training/: "
              f"{', '.join(short(m for m in pulled if folder(m) == 'training')) or 'none'}")
    return 1 if found or upward else 0


if __name__ == "__main__":
    sys.exit(main())
