"""`python -m benchmarks list | run NAME [args...] | headline [--write]`, from the repository root.

    python -m benchmarks list                          # every maintained benchmark, one line each
    python -m benchmarks run rollout_engine --quick    # a benchmark with its own arguments (--help lists them)
    python -m benchmarks run experiments.huge_pages    # a frozen experiment (runnable, not listed)
    python -m benchmarks headline                      # the README's headline table, from result files
    python -m benchmarks headline --write              # ... written between the README's markers
"""

from __future__ import annotations

import argparse
import ast
import re
import runpy
import sys
from pathlib import Path

from benchmarks import harness, tables

HERE = Path(__file__).resolve().parent
NOT_BENCHMARKS = {"__init__", "__main__", "harness", "tables"}
"""Modules of the package that are no benchmark: the shared harness, the tables and the entry point."""
LISTED_FOLDERS = ("", "gpu")
"""Where maintained benchmarks live: the package itself and gpu/ (experiments/ is runnable, not listed)."""


def _runnable(path: Path) -> bool:
    """A module with a `__main__` block (grpo_work and teamrl_steps are libraries the benchmarks share)."""
    return 'if __name__ == "__main__"' in path.read_text()


def description(path: Path) -> str:
    """The first line of a module's docstring, read without importing it (no torch import to list)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    sentence = re.split(r"(?<=[.!?])\s", paragraph, maxsplit=1)[0]
    return sentence or "(no docstring)"


def maintained() -> dict[str, Path]:
    """Benchmark name (`scaling`, `gpu.vllm_check`) -> its file, for every maintained benchmark."""
    found: dict[str, Path] = {}
    for folder in LISTED_FOLDERS:
        for path in sorted((HERE / folder).glob("*.py")):
            if path.stem not in NOT_BENCHMARKS and _runnable(path):
                found[f"{folder}.{path.stem}" if folder else path.stem] = path
    return found


def experiments() -> dict[str, Path]:
    return {f"experiments.{p.stem}": p for p in sorted((HERE / "experiments").glob("*.py"))
            if p.stem != "__init__" and _runnable(p)}


def resolve(name: str) -> str:
    """A benchmark's name (`scaling`, `gpu/vllm_check`, `experiments.huge_pages`) -> its module; an unknown
    name is an error that lists the known ones."""
    key = name.removesuffix(".py").replace("/", ".")
    known = {**maintained(), **experiments()}
    if key not in known:
        raise SystemExit(f"unknown benchmark {name!r}; maintained: {', '.join(maintained())}; "
                         f"experiments: {', '.join(experiments())} (python -m benchmarks list)")
    return f"benchmarks.{key}"


def cmd_list() -> int:
    names = maintained()
    width = max(map(len, names))
    for name, path in names.items():
        print(f"{name:<{width}}  {description(path)}")
    print(f"\n{len(names)} benchmarks; `python -m benchmarks run NAME --help` for one's arguments; "
          f"frozen experiments: {', '.join(experiments())}")
    return 0


def cmd_run(name: str, args: list[str]) -> int:
    """Runs the benchmark as `__main__`, with argv[0] naming the command that reruns it (its provenance)."""
    module = resolve(name)
    harness.INVOKED_AS = f"python -m benchmarks run {name}"
    sys.argv = [harness.INVOKED_AS, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as stop:  # the benchmark's own exit status
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else _say(stop.code))
    return 0


def _say(message: object) -> int:
    print(message, file=sys.stderr)
    return 1


def cmd_headline(write: bool, readme: Path) -> int:
    table = tables.headline_table()
    if not write:
        print(table)
        return 0
    try:
        readme.write_text(tables.replace_block(readme.read_text(), table))
    except ValueError as err:
        return _say(f"{readme}: {err}")
    print(f"wrote the headline table into {readme}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every maintained benchmark with its one-line description")
    run = sub.add_parser("run", help="run a benchmark: NAME then its own arguments",
                         description="Run benchmark NAME; every argument after NAME is the benchmark's own.")
    run.add_argument("name", metavar="NAME")
    run.add_argument("args", nargs=argparse.REMAINDER)
    head = sub.add_parser("headline", help="the README's headline table, rendered from result files")
    head.add_argument("--write", action="store_true", help="replace the table between the README's markers")
    head.add_argument("--readme", type=Path, default=tables.README, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.command == "list":
        return cmd_list()
    if args.command == "run":
        return cmd_run(args.name, args.args)
    return cmd_headline(args.write, args.readme)


if __name__ == "__main__":
    raise SystemExit(main())
