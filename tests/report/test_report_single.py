"""The report of one run: files, sections, plots, escaping, and loud failures on bad run dirs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from teamrl.report import ReportError, load_run, report_command
from teamrl.report.single import chosen_eval_steps

PLOTS = ["heldout.png", "training.png", "roles.png", "policies.png", "advantages.png", "timing.png",
         "alerts.png", "diag-gradients.png", "diag-behaviour.png", "diag-accuracy.png"]


@pytest.fixture
def report(single_report) -> tuple[Path, str]:
    """Run "alpha": held-out success 25%, 40%, 70%, 60%, 65% at steps 0..40 (conftest.SINGLE_SUCCESS)."""
    return single_report


def test_report_lands_in_run_dir_with_its_plots(report) -> None:
    page, html = report
    assert page == page.parent.parent / "report" / "index.html"
    assert page.parent.parent.name == "alpha"
    for name in PLOTS:
        png = page.parent / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert png.stat().st_size > 5_000, f"{name} looks empty"
        # Relative references keep the report folder copyable.
        assert f'src="{name}"' in html
    assert not re.search(r'src="(/|file:|https?:)', html), "every image must be referenced relatively"


def test_sections_and_captions(report) -> None:
    _, html = report
    for heading in ["Summary", "Held-out success", "Training rollouts", "Per-agent (role) curves",
                    "Per-policy optimisation", "Advantage signal", "Time per phase", "Alerts",
                    "Per-role gradients", "Per-role behaviour", "Per-role accuracy and optimisation",
                    "Sample held-out transcripts", "Sample training transcripts", "Resolved config", "Every logged metric"]:
        assert f"<h2>{heading}</h2>" in html, heading
    assert html.count("<figcaption>") == len(PLOTS)
    assert "task plan_path · workflow team · regime shared" in html
    # The config is collapsible and holds the resolved values.
    assert re.search(r"<details>\s*<summary>config\.yaml", html)
    assert "tiny-default" in html


def test_summary_numbers(report) -> None:
    _, html = report
    summary = html.split('<section id="summary">')[1].split("</section>")[0]
    cells = re.findall(r'<td class="num">([^<]*)</td>', summary)
    assert cells[:6] == ["25.0%", "65.0%", "70.0%", "20", "40", "123.4 s"]
    assert "tool → shared" in summary


def test_transcripts_at_first_best_and_last_eval(report) -> None:
    _, html = report
    assert re.findall(r'id="transcripts-step(\d+)"', html) == ["0", "20", "40"]
    assert "Step 20 (best held-out success) — held-out success 70.0%" in html
    assert "step 40 instance 2 turn 1" in html
    assert "format = 0.1<br>&lt;goal&gt; = 0.4" in html


def test_model_output_is_escaped(report) -> None:
    _, html = report
    assert "<script" not in html.lower(), "transcript markup reached the page as HTML"
    assert "&lt;script&gt;document.body.setAttribute(&#x27;data-pwned&#x27;,&#x27;1&#x27;)&lt;/script&gt;" in html
    assert "&lt;b&gt;bold?&lt;/b&gt; &amp; &quot;quotes&quot;" in html


def test_chosen_steps_fall_back_to_best_saved_eval(tmp_path, make_run) -> None:
    run_dir = make_run("beta", [0.1, 0.5, 0.3], steps=20, eval_every=10)
    (run_dir / "transcripts" / "eval_step00010.json").unlink()  # best step's transcript missing
    run = load_run(run_dir)
    assert chosen_eval_steps(run) == [(0, "first evaluation, before training"),
                                      (20, "best held-out success, last evaluation")]


def test_unfinished_run_and_missing_groups_still_render(tmp_path, make_run) -> None:
    run_dir = make_run("gamma", [0.2, 0.3, 0.35], steps=20, eval_every=10, summary=False)
    # Strip every policy/ metric: that plot must become a visible note, not a crash.
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    (run_dir / "metrics.jsonl").write_text("".join(
        json.dumps({k: v for k, v in row.items() if not k.startswith("policy/")}) + "\n" for row in rows))
    out = tmp_path / "elsewhere"
    page = report_command([str(run_dir)], str(out))
    html = page.read_text()
    assert page == out / "index.html" and not (run_dir / "report").exists()
    assert "No summary.json" in html
    assert "Not plotted: this run logged no data for “Per-policy optimisation”" in html
    assert not (out / "policies.png").exists()
    summary = html.split('<section id="summary">')[1].split("</section>")[0]
    assert re.findall(r'<td class="num">([^<]*)</td>', summary)[:6] == [
        "20.0%", "35.0%", "35.0%", "20", "20", "60.0 s"]


@pytest.mark.parametrize("bad_line, complaint", [
    ("", "empty line"),
    ('{"step": 3, "train/success": 0.5', "not valid JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"train/success": 0.5}', "missing or non-integer 'step'"),
    ('{"step": 3, "train/success": "high"}', "'train/success' should be a finite number or null"),
])
def test_malformed_metrics_line_names_file_and_line(make_run, bad_line: str, complaint: str) -> None:
    run_dir = make_run("delta", [0.1, 0.2], steps=10, eval_every=10)
    metrics = run_dir / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    lines[2] = bad_line
    metrics.write_text("\n".join(lines) + "\n")
    with pytest.raises(ReportError) as err:
        report_command([str(run_dir)], None)
    assert f"{metrics}, line 3: {complaint}" in str(err.value)
    assert not (run_dir / "report").exists(), "nothing should be written for a bad run"


def test_missing_or_wrong_run_dirs_fail_clearly(tmp_path, make_run) -> None:
    with pytest.raises(ReportError, match=r"run directory .*nowhere does not exist"):
        report_command([str(tmp_path / "nowhere")], None)
    (tmp_path / "plain").mkdir()
    with pytest.raises(ReportError, match=r"plain has no metrics.jsonl"):
        report_command([str(tmp_path / "plain")], None)
    run_dir = make_run("epsilon", [0.1, 0.2], steps=10, eval_every=10)
    (run_dir / "metrics.jsonl").write_text("")
    with pytest.raises(ReportError, match=r"metrics.jsonl is empty"):
        report_command([str(run_dir)], None)
    with pytest.raises(ReportError, match="at least one run directory"):
        report_command([], None)


def test_malformed_side_files_name_the_file(make_run) -> None:
    run_dir = make_run("zeta", [0.1, 0.2], steps=10, eval_every=10)
    bad = run_dir / "transcripts" / "eval_step00010.json"
    bad.write_text('{"not": "a list"}')
    with pytest.raises(ReportError, match=re.escape(f"{bad}: expected a list of episodes")):
        report_command([str(run_dir)], None)
    bad.unlink()
    (run_dir / "summary.json").write_text("{oops")
    with pytest.raises(ReportError, match=re.escape(f"{run_dir / 'summary.json'}: not valid JSON")):
        report_command([str(run_dir)], None)


def test_alerts_are_listed_in_plain_words_and_escaped(report) -> None:
    _, html = report
    alerts = html.split('<section id="alerts">')[1].split("</section>")[0]
    assert 'src="alerts.png"' in alerts
    row = re.search(r'<td class="num">(\d+)</td><td>dominant role</td><td>(.*?)</td>', alerts)
    assert row and row.group(1) == "20"
    assert row.group(2).startswith("Dominant role: role &#x27;tool&#x27; carries 85% of the gradient &lt;script&gt;")


def test_training_transcripts_show_each_turns_advantage(report) -> None:
    _, html = report
    section = html.split('<section id="train-transcripts">')[1].split("</section>")[0]
    assert re.findall(r'id="train-transcripts-step(\d+)"', section) == ["10", "20", "30"]
    assert "<th>advantage</th>" in section
    # turn 2 of a fake episode: reward 1.0, advantage 0.25 * 2 - 0.3 = 0.2
    assert re.search(r'<td class="num">1</td><td class="num">0.2</td>', section)
    held_out = html.split('<section id="transcripts">')[1].split("</section>")[0]
    assert "<th>advantage</th>" not in held_out  # eval transcripts carry no advantages


def test_a_run_without_diagnostics_says_so(make_run) -> None:
    run = make_run("plain", [0.2, 0.3], steps=10, eval_every=10)
    (run / "alerts.jsonl").unlink()
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (run / "metrics.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if not k.startswith("diag/")})
                                               + "\n" for r in rows))
    html = report_command([str(run)], None).read_text()
    assert "No alerts:" in html
    assert "Not plotted: this run logged no data for “per-role gradients”" in html
