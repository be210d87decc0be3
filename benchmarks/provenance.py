"""Where a benchmark result came from: the commit it ran at and the exact command, stored beside the numbers.

The docs' results page (docs/hooks/results_page.py) prints them next to every number; results written
before this existed take theirs from benchmarks/results/provenance.yaml.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from statistics import median
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit(root: Path = ROOT) -> str:
    """HEAD's short hash, with '+dirty' when tracked files differ from it; 'unknown' outside a git checkout
    (a `git archive` export: pass the commit with TEAMRL_COMMIT=...)."""
    if os.environ.get("TEAMRL_COMMIT"):
        return os.environ["TEAMRL_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def provenance() -> dict[str, str]:
    """{commit, command, date, load} of the running benchmark."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return {"commit": git_commit(), "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_average": f"{load:.1f}"}


class Lines:
    """A benchmark's report: each line printed as it comes and kept, then written to a results file."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        self.lines.append(line)

    @classmethod
    def started(cls) -> "Lines":
        """A report whose first line says where it came from: command, commit, date and load at start."""
        meta, lines = provenance(), cls()
        lines(f"# {meta['command']} at {meta['commit']}, {meta['date']}, load {meta['load_average']} at start")
        return lines

    def write(self, path: str | Path) -> None:
        Path(path).write_text("\n".join(self.lines) + "\n")

    def finish(self, path: str | Path = "") -> None:
        """The closing load-average line, then the report written to `path` (when given)."""
        self(f"load {os.getloadavg()[0]:.1f} at end")
        if path:
            self.write(path)


def spread(values: list[float], fmt: str = "6.2f", scale: float = 1.0) -> str:
    """'min A median B max C' of `values` (each times `scale`), formatted with `fmt`."""
    low, mid, high = (scale * v for v in (min(values), median(values), max(values)))
    return f"min {low:{fmt}} median {mid:{fmt}} max {high:{fmt}}"
