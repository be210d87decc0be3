"""What made a study's results file: one entry per command that ran cells into it.

Each entry: the command line, the commit of the source tree (and whether it had uncommitted changes),
the code digest its cells were made with, the host CPU (model name, vendor, family, model, as lscpu
reports them from /proc/cpuinfo), the seeds and rows it was asked for, when it started and its wall
time. A table run a few rows per command over days keeps every command that added to it.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
"""The source tree's root (src/teamrl/study -> the repository), where the commit is read."""


def cpu_fields(cpuinfo: str) -> dict[str, str]:
    """The first CPU's model name, vendor, family and model from a /proc/cpuinfo text.

    >>> cpu_fields("processor : 0\\nvendor_id : GenuineIntel\\ncpu family : 6\\nmodel : 143\\nmodel name : Xeon X")
    {'model_name': 'Xeon X', 'vendor': 'GenuineIntel', 'family': '6', 'model': '143'}
    """
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block only
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return {
        "model_name": fields.get("model name", platform.processor() or platform.machine()),
        "vendor": fields.get("vendor_id", ""),
        "family": fields.get("cpu family", ""),
        "model": fields.get("model", ""),
    }


def host_cpu() -> dict[str, str]:
    try:
        return cpu_fields(Path("/proc/cpuinfo").read_text())
    except OSError:
        return cpu_fields("")


def commit(root: Path = ROOT) -> dict[str, Any]:
    """{commit, dirty}: HEAD of the source tree and whether tracked files differ from it ('' outside git)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {"commit": "", "dirty": None}
    return {"commit": head, "dirty": bool(status.strip())}


def command_entry(seeds: list[int], rows: list[str], code: str, argv: list[str] | None = None) -> dict[str, Any]:
    """A new entry for the command now running (its wall time is filled in by `finish`)."""
    return {
        "command": shlex.join(sys.argv if argv is None else argv),
        "pid": os.getpid(),
        **commit(),
        "code": code,
        "cpu": host_cpu(),
        "seeds": seeds,
        "rows": rows,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": None,
        "cells_run": 0,
    }
