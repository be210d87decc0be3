"""`python -m benchmarks`: every maintained benchmark listed with its description, each one starts (--help),
an unknown name lists the known ones, and no script of benchmarks/ or scripts/ edits sys.path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import __main__ as entry

ROOT = Path(__file__).resolve().parents[2]


def test_list_names_every_maintained_benchmark_with_its_docstring_line(capsys):
    assert entry.main(["list"]) == 0
    out = capsys.readouterr().out
    names = entry.maintained()
    assert {"scaling", "trl_side_by_side", "rollout_engine", "gpu.vllm_check"} <= set(names)
    assert not {"harness", "tables", "grpo_work", "teamrl_steps"} & set(names)  # shared modules, no benchmarks
    assert not any(name.startswith("experiments.") for name in names)
    for name, path in names.items():
        assert f"{name}  " in out and entry.description(path) in out and entry.description(path) != "(no docstring)"


def test_an_unknown_benchmark_is_refused_with_the_known_names():
    with pytest.raises(SystemExit, match="maintained: .*scaling.*experiments: .*experiments.huge_pages"):
        entry.resolve("no_such_bench")
    assert entry.resolve("gpu/vllm_check") == "benchmarks.gpu.vllm_check"
    assert entry.resolve("experiments.huge_pages") == "benchmarks.experiments.huge_pages"


def test_a_benchmark_runs_through_the_entry_point_and_records_that_command(tmp_path):
    # matmul_peak at 32^3: a functional run of the harness, no timing
    out = tmp_path / "peak.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks", "run", "matmul_peak", "--size", "32", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"# python -m benchmarks run matmul_peak --size 32 --out {out} at ")
    assert out.with_suffix(".txt").read_text().splitlines() == done.stdout.splitlines()


def test_no_script_edits_sys_path():
    scripts = [*(ROOT / "benchmarks").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]
    assert len(scripts) > 40
    assert [str(p.relative_to(ROOT)) for p in scripts if "sys.path" in p.read_text()] == []
