"""The comparison page: overlaid plots and one table row per run with its headline numbers."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from teamrl.report import ReportError, load_run, report_command
from teamrl.report.compare import run_labels


class _Rows(HTMLParser):
    """The text of every <tbody> row's cells (a test-side reading of the table, independent of page.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._in_body = self._in_cell = False

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.rows.append([])
        elif tag == "td" and self._in_body:
            self._in_cell = True
            self.rows[-1].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self._in_body = False
        elif tag == "td":
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.rows[-1][-1] += data


@pytest.fixture
def comparison(comparison_report) -> tuple[Path, str, list[Path]]:
    return comparison_report


def test_comparison_files_and_plots(comparison) -> None:
    page, html, runs = comparison
    assert page.name == "index.html" and page.parent.name == "comparison"
    for name in ["compare_heldout.png", "compare_train.png", "compare_roles.png"]:
        assert (page.parent / name).read_bytes()[:4] == b"\x89PNG", name
        assert f'src="{name}"' in html
    for heading in ["Headline numbers", "Held-out success", "Training rollouts", "Per-agent reward"]:
        assert f"<h2>{heading}</h2>" in html
    assert all(not (r / "report").exists() for r in runs), "a comparison writes only to --out"


def test_table_has_one_row_per_run_with_right_numbers(comparison) -> None:
    _, html, runs = comparison
    table = html.split('<section id="table">')[1].split("</section>")[0]
    parser = _Rows()
    parser.feed(table)
    assert [row[:7] for row in parser.rows] == [
        ["■ alpha", "25.0%", "70.0%", "65.0%", "20", "40", "100.0 s"],
        ["■ beta", "10.0%", "50.0%", "50.0%", "20", "20", "50.0 s"],
        # No summary.json: numbers recovered from metrics.jsonl, and the row says so.
        ["■ gamma (unfinished: from metrics.jsonl)", "30.0%", "45.0%", "45.0%", "20", "20", "60.0 s"],
    ]
    assert [row[7] for row in parser.rows] == [str(r.resolve()) for r in runs]


def test_same_named_runs_get_distinct_labels(tmp_path, write_fake_run) -> None:
    a = write_fake_run(tmp_path / "seed0", "run", [0.1, 0.2], steps=10)
    b = write_fake_run(tmp_path / "seed1", "run", [0.1, 0.3], steps=10)
    assert run_labels([load_run(a), load_run(b)]) == ["seed0/run", "seed1/run"]
    assert run_labels([load_run(a), load_run(a)]) == ["seed0/run #1", "seed0/run #2"]


def test_one_bad_run_stops_the_comparison_before_writing(tmp_path, make_run) -> None:
    good = make_run("good", [0.1, 0.2], steps=10)
    out = tmp_path / "cmp"
    with pytest.raises(ReportError, match=re.escape(f"run directory {tmp_path / 'missing'} does not exist")):
        report_command([str(good), str(tmp_path / "missing")], str(out))
    assert not out.exists()
