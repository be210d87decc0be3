"""The README's headline table is the one rendered from the result files, and each text-only result's JSON
summary quotes its text file truthfully."""

from __future__ import annotations

import json

import pytest

from benchmarks import tables

SUMMARIES = sorted(p for p in tables.RESULTS.glob("*/*/*.json") if "summary_of" in json.loads(p.read_text()))


def test_the_readme_block_is_the_table_rendered_from_the_result_files():
    block = tables.readme_block(tables.README.read_text())
    assert block is not None, (f"README.md has no headline block: put {tables.START} and {tables.END} where the "
                               f"table goes, then run `{tables.REGENERATE}`")
    assert block == tables.headline_table(), f"README.md's headline table is stale: run `{tables.REGENERATE}`"


def test_the_headline_has_at_most_six_rows_each_naming_its_host_and_command():
    rows = tables.headline_rows()
    assert 1 <= len(rows) <= 6
    for what, command, result, host in rows:
        assert command.startswith("`python -m ") and host.startswith("`") and "benchmarks/results/" in result, what


def test_a_row_without_its_figure_is_an_error_naming_file_and_figure():
    row = tables.HeadlineRow("x", tables.HEADLINE[0].result, "{no_such_figure}")
    with pytest.raises(ValueError, match="no_such_figure"):
        tables.headline_rows((row,))
    with pytest.raises(ValueError, match="at most 6"):
        tables.headline_rows(tables.HEADLINE[:1] * 7)


def test_replace_block_swaps_only_the_marked_table_and_refuses_a_readme_without_markers():
    text = f"intro\n{tables.START}\n| old |\n{tables.END}\nrest\n"
    assert tables.replace_block(text, "| new |") == f"intro\n{tables.START}\n| new |\n{tables.END}\nrest\n"
    assert tables.readme_block(tables.replace_block(text, "| new |")) == "| new |"
    with pytest.raises(ValueError, match="headline --write"):
        tables.replace_block("no markers\n", "| t |")


def test_results_table_lists_host_commit_and_figures_per_file():
    table = tables.results_table([row.result for row in tables.HEADLINE[:2]], ["samples_per_cpu_s_ratio"])
    lines = table.splitlines()
    assert lines[0] == "| file | host | commit | date | samples_per_cpu_s_ratio |" and len(lines) == 4
    assert "| amd-avx512-full | `e395234+dirty` |" in lines[2] and lines[2].endswith("| 4.75 |")


@pytest.mark.parametrize("summary", SUMMARIES, ids=lambda p: p.name)
def test_a_summary_quotes_its_text_file_and_each_figure_is_in_its_quote(summary):
    data = json.loads(summary.read_text())
    text = (summary.parent / data["summary_of"]).read_text()
    assert set(data["quotes"]) == set(data["figures"])
    for name, quote in data["quotes"].items():
        assert quote in text, (name, quote)
        value = data["figures"][name]
        assert f"{value:g}" in quote or str(value) in quote, (name, value, quote)
    assert data["provenance"]["host"] == summary.parent.name
