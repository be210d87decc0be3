"""benchmarks/harness.py: a report's provenance header, the host slug from /proc/cpuinfo, `--out` and its
deprecated alias, and results written as JSON with the text beside them."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from benchmarks import harness

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 fma

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
flags\t\t: fpu
"""
SAPPHIRE = ("vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8488C\n"
            "flags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n")


def test_a_started_report_names_command_commit_date_load_and_host_then_is_written(tmp_path, capsys):
    out = harness.Lines.started()
    out("a result")
    out.finish(tmp_path / "report.txt", {"speed": 2.5})
    lines = (tmp_path / "report.txt").read_text().splitlines()
    assert re.fullmatch(r"# python \S.* at \S+, \d{4}-\d\d-\d\d \d\d:\d\d UTC, load [\d.na]+ at start", lines[0])
    assert re.fullmatch(r"# host \S+ \(.*\), torch \S+, \d+ threads?", lines[1]), lines[1]
    assert lines[2] == "a result" and re.fullmatch(r"load \d+\.\d at end", lines[3]) and len(lines) == 4
    assert capsys.readouterr().out.splitlines() == lines  # each line printed as it came
    result = json.loads((tmp_path / "report.json").read_text())
    assert result["lines"] == lines and result["figures"] == {"speed": 2.5}
    assert {"commit", "command", "date", "load_average", "load_at_end", "host", "cpu", "isa", "torch",
            "threads"} <= set(result["provenance"])


def test_the_host_slug_is_vendor_family_model_of_the_first_processor():
    assert harness.host_slug(ZEN4) == "amd-25-17"
    assert harness.host_slug(SAPPHIRE) == "intel-6-143"
    assert harness.host_slug("") == harness.host_slug("vendor_id : GenuineIntel\n") == "unknown-host"


def test_host_info_names_the_cpu_and_its_vector_units_in_a_fixed_order():
    assert harness.host_info(ZEN4) == {"host": "amd-25-17", "cpu": "AMD EPYC 9R14 96-Core Processor",
                                       "isa": ["avx2", "avx512f", "avx512_bf16"]}
    assert harness.host_info(SAPPHIRE)["isa"] == ["avx2", "avx512f", "avx512_bf16", "amx_bf16"]


def test_out_defaults_to_the_benchmark_and_host_folder_and_output_is_its_deprecated_alias(capsys):
    parser = argparse.ArgumentParser()
    harness.add_out_argument(parser, "scaling")
    default = parser.parse_args([]).out
    assert default == str(harness.RESULTS / "scaling" / harness.host_info()["host"] / "scaling.json")
    assert parser.parse_args(["--out", "a.json"]).out == "a.json"
    with pytest.warns(DeprecationWarning, match="--out"):
        assert parser.parse_args(["--output", "b.txt"]).out == "b.txt"
    assert "--output is deprecated" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "json_name", "text_name"), [("r.json", "r.json", "r.txt"), ("r.txt", "r.json", "r.txt"),
                                                            ("r.log", "r.log.json", "r.log")])
def test_a_result_is_written_as_json_with_its_text_beside_it(tmp_path, given, json_name, text_name):
    meta = {"commit": "abc1234", "command": "python -m benchmarks run x"}
    written = harness.write_result(tmp_path / "deep" / given, ["one", "two"], {"x": 1}, meta)
    assert written == tmp_path / "deep" / json_name
    data = json.loads(written.read_text())
    assert data["provenance"]["commit"] == "abc1234" and "load_at_end" in data["provenance"]
    assert data["lines"] == ["one", "two"] and data["figures"] == {"x": 1}
    assert (tmp_path / "deep" / text_name).read_text() == "one\ntwo\n"


def test_the_command_names_the_entry_point_when_it_started_the_benchmark(monkeypatch):
    monkeypatch.setattr(harness, "INVOKED_AS", "python -m benchmarks run scaling")
    assert harness.command_line(["/x/scaling.py", "--quick", "a b"]) == "python -m benchmarks run scaling --quick 'a b'"
    monkeypatch.setattr(harness, "INVOKED_AS", "")
    assert harness.command_line(["benchmarks/scaling.py", "--quick"]) == "python benchmarks/scaling.py --quick"


def test_a_printed_report_is_kept_and_written(tmp_path, capsys):
    with harness.printed_report(tmp_path / "p.json"):
        print("row 1")
        print("row 2")
    assert capsys.readouterr().out == "row 1\nrow 2\n"
    assert json.loads((tmp_path / "p.json").read_text())["lines"] == ["row 1", "row 2"]
