"""The package's layering (scripts/import_graph.py LAYERS): no import circles, nothing imports upward,
and serving, replaying or probing a team loads no part of the training loop."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


import_graph = _load_import_graph()

# Users of a loaded team: none of them may reach training/ (`teamrl.setup` builds the team).
TEAM_USERS = ("teamrl.gateway.serve", "teamrl.report.alert_replay", "teamrl.probes", "teamrl.probes.teammate",
              "teamrl.setup.loaded_team")


@pytest.fixture(scope="module")
def graph():
    return import_graph.load_graph(ROOT / "src" / "teamrl")


def test_no_import_circles(graph):
    found = import_graph.circles(graph)
    assert found == [], "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_nothing_imports_upward(graph):
    upward = import_graph.upward_imports(graph)
    assert upward == [], "imports of a folder not below the importer's (LAYERS): " + ", ".join(
        f"{a} -> {b}" for a, b in upward)


def test_every_folder_has_a_layer(graph):
    folders = {import_graph.folder(m) for m in graph.files}
    for name in folders:
        import_graph.layer_of(name)  # a KeyError names the folder to place


@pytest.mark.parametrize("user", TEAM_USERS)
def test_team_users_import_nothing_of_training(graph, user):
    reached = sorted(m for m in graph.closure(user) if import_graph.folder(m) == "training")
    assert reached == [], f"{user} reaches training/ through {reached}"


# `teamrl` commands that use a team without training it, and what each may not reach.
TEAM_COMMANDS = ("cmd_eval", "cmd_serve", "cmd_alerts", "cmd_probe", "_set_threads")


def _imports_in_function(graph, path: Path, function: str) -> set[str]:
    """The teamrl modules the body of `function` in `path` imports."""
    tree = ast.parse(path.read_text())
    body = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == function)
    found = set()
    for node in ast.walk(body):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("teamrl"):
            for alias in node.names:
                found.add(graph.module_of(f"{node.module}.{alias.name}"))
        elif isinstance(node, ast.Import):
            found.update(graph.module_of(alias.name) for alias in node.names if alias.name.startswith("teamrl"))
    return {m for m in found if m}


@pytest.mark.parametrize("command", TEAM_COMMANDS)
def test_team_commands_import_nothing_of_training(graph, command):
    """`teamrl eval`, `serve`, `alerts` and `probe` (function-level imports of cli.py) stay out of training/."""
    direct = _imports_in_function(graph, ROOT / "src" / "teamrl" / "cli.py", command)
    assert direct, f"cli.{command} imports no teamrl module: is it still the command's function?"
    reached = set(direct)
    for module in direct:
        reached |= graph.closure(module)
    training = sorted(m for m in reached if import_graph.folder(m) == "training")
    assert training == [], f"cli.{command} reaches training/ through {training}"


def test_serving_replaying_and_probing_load_no_training_loop():
    """The imports as Python runs them, in a fresh interpreter (function-level imports aside)."""
    code = ("import json, sys\n"
            + "".join(f"import {m}\n" for m in TEAM_USERS)
            + "print(json.dumps(sorted(m for m in sys.modules if m.startswith('teamrl.training'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "teamrl.training.loop" not in loaded and "teamrl.training.update" not in loaded, loaded
    assert loaded == [], f"training modules loaded by a team's users: {loaded}"


def test_the_graph_sees_function_level_and_relative_imports(tmp_path):
    """A circle made only by a function-level import counts; a relative import resolves to its module."""
    package = tmp_path / "teamrl"
    (package / "rollout").mkdir(parents=True)
    (package / "training").mkdir()
    (package / "__init__.py").write_text("")
    (package / "rollout" / "__init__.py").write_text("")
    (package / "training" / "__init__.py").write_text("")
    (package / "rollout" / "a.py").write_text("from .b import thing\n")
    (package / "rollout" / "b.py").write_text("def thing():\n    from teamrl.rollout import a\n")
    (package / "training" / "loop.py").write_text("from teamrl.rollout.a import x\n")
    (package / "rollout" / "c.py").write_text("import teamrl.training.loop\n")
    graph = import_graph.load_graph(package)
    assert import_graph.circles(graph) == [["teamrl.rollout.a", "teamrl.rollout.b"]]
    assert import_graph.upward_imports(graph) == [("teamrl.rollout.c", "teamrl.training.loop")]
    assert graph.closure("teamrl.training.loop") == {"teamrl.rollout.a", "teamrl.rollout.b"}


def test_every_package_folder_is_a_regular_package():
    """setuptools' find_packages skips a folder without __init__.py: its modules would not be installed."""
    source = ROOT / "src" / "teamrl"
    missing = sorted(str(p.parent.relative_to(source)) for p in source.rglob("*.py")
                     if not (p.parent / "__init__.py").is_file())
    assert missing == [], f"folders with modules but no __init__.py: {sorted(set(missing))}"
