"""MkDocs hook: fill docs/results-data.md with every study result in benchmarks/results/<script>/<host>/,
each with its commit and command (stored in the result, else in benchmarks/results/provenance.yaml, keyed
by file name), and put the headline table (benchmarks/tables.py, rendered from result files) where a page
asks for it."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path

import yaml

MARKER = "<!-- generated: results data -->"
HEADLINE_MARKER = "<!-- generated: headline table -->"
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _tables_module():
    """benchmarks/tables.py, loaded by its path: the site may be built from any working directory."""
    spec = importlib.util.spec_from_file_location("benchmark_tables", ROOT / "benchmarks" / "tables.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def _value(raw):
    """Older results stored nested values with str(); read them back as Python literals."""
    if isinstance(raw, str) and raw[:1] in "{[":
        try:
            return ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return raw
    return raw


def _pct(x) -> str:
    return f"{100 * float(x):.1f}%"


def _is_comparison(data) -> bool:
    """A method comparison's result: a list of runs (or {"runs": [...]}) with run, initial, final and best.
    Any other JSON file (a benchmark's summary) is no study result and is left out of the page."""
    runs = data.get("runs") if isinstance(data, dict) else data
    return isinstance(runs, list) and all(isinstance(r, dict) and {"run", "initial", "final", "best"} <= set(r)
                                          for r in runs)


def _rows() -> tuple[list[str], list[str]]:
    legacy = yaml.safe_load((RESULTS / "provenance.yaml").read_text()) or {}
    domains, studies = [], []
    for path in sorted(RESULTS.glob("*/*/*.json")):
        data = json.loads(path.read_text())
        prov = data.get("provenance") if isinstance(data, dict) else None
        prov = prov or legacy.get(path.name) or {"commit": "not recorded", "command": "not recorded"}
        where = f"`{prov['commit']}`", f"`{prov['command']}`"
        if isinstance(data, dict) and "trained_team" in data:
            untrained, trained, best = (_value(data[k]) for k in ("untrained_team", "trained_team", "best"))
            single = _value(data.get("untrained_single")) or {}
            domains.append(f"| `{path.relative_to(RESULTS)}` | {data['domain']} | {data['seed']} | {data['steps']} | "
                           f"{_pct(single.get('success', 0))} | {_pct(untrained['success'])} | "
                           f"{_pct(trained['success'])} | {_pct(best['success'])} (step {best['step']}) | "
                           f"{where[0]} | {where[1]} |")
        elif _is_comparison(data):
            runs = data["runs"] if isinstance(data, dict) else data
            for run in runs:
                studies.append(f"| `{path.relative_to(RESULTS)}` | {run['run']} | {run.get('steps', 0)} | {_pct(run['initial'])} | "
                               f"{_pct(run['final'])} | {_pct(run['best'])} | {where[0]} | {where[1]} |")
    return domains, studies


def generated_results() -> str:
    domains, studies = _rows()
    head_d = ("| file | domain | seed | steps | untrained single | untrained team | trained team | best | commit | "
              "command |\n|---|---|---|---|---|---|---|---|---|---|")
    head_s = "| file | run | steps | before | after | best | commit | command |\n|---|---|---|---|---|---|---|---|"
    return ("## Domain studies (`scripts/study/domain_study.py`)\n\n" + head_d + "\n" + "\n".join(domains) +
            "\n\n## Method comparisons (`scripts/study/plan_path_study.py`)\n\n" + head_s + "\n" + "\n".join(studies) + "\n")


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs' hook signature)
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, generated_results())
    if HEADLINE_MARKER in markdown:
        markdown = markdown.replace(HEADLINE_MARKER, _tables_module().headline_table(links=False))
    return markdown
