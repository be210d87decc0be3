"""benchmarks/harness.py's Lines: a report opens with where it came from and closes with the load at its end."""

from __future__ import annotations

import re

from tests.benchmark_modules import load_benchmark

provenance = load_benchmark("provenance")


def test_a_started_report_names_command_commit_date_and_load_then_is_written(tmp_path, capsys):
    out = provenance.Lines.started()
    out("a result")
    out.finish(tmp_path / "report.txt")
    lines = (tmp_path / "report.txt").read_text().splitlines()
    assert re.fullmatch(r"# python \S.* at \S+, \d{4}-\d\d-\d\d \d\d:\d\d UTC, load [\d.na]+ at start", lines[0])
    assert lines[1] == "a result" and re.fullmatch(r"load \d+\.\d at end", lines[2]) and len(lines) == 3
    assert capsys.readouterr().out.splitlines() == lines  # each line printed as it came
