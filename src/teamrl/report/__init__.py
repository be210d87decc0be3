"""HTML reports of training runs: `teamrl report RUN_DIR [RUN_DIR ...]`.

One run directory gives RUN_DIR/report/index.html: summary, curves, resolved config and sample
held-out transcripts. Several give one comparison page (overlaid curves, a headline table).
Plots are PNG files next to index.html, referenced by relative path, so the report folder can
be copied or zipped as a whole; the page needs no network, no JavaScript and no server.
"""

from __future__ import annotations

from pathlib import Path

from teamrl.report.compare import write_comparison
from teamrl.report.runs import ReportError, RunData, load_run
from teamrl.report.single import write_run_report

__all__ = ["ReportError", "RunData", "load_run", "report_command", "DEFAULT_COMPARE_DIR"]

# Where a comparison goes when no --out is given: relative to the current directory, because
# the runs being compared may live in unrelated folders.
DEFAULT_COMPARE_DIR = "teamrl-compare"


def report_command(run_dirs: list[str], out: str | None) -> Path:
    """Write the report of one run, or the comparison of several; returns the index.html path.

    With one run, `out` defaults to RUN_DIR/report; with several, to ./teamrl-compare.
    Every run directory is read and validated before anything is written, so a bad one leaves
    no half-written report behind. Raises ReportError naming the file (and line) at fault.
    """
    if not run_dirs:
        raise ReportError("give at least one run directory")
    runs = [load_run(path) for path in run_dirs]
    if len(runs) == 1:
        return write_run_report(runs[0], Path(out) if out else runs[0].path / "report")
    return write_comparison(runs, Path(out) if out else Path(DEFAULT_COMPARE_DIR))
