"""What every benchmark shares: where its result came from, where it goes, and how it is written.

- provenance: command, commit, date, the host's CPU model and vector units (avx2, avx512f, avx512_bf16,
  amx_bf16), torch version, threads, and the load at start and end;
- `--out`: one argument for the result path, by default benchmarks/results/<benchmark>/<host>/<benchmark>.json,
  where <host> is a slug of the CPU (vendor-family-model from /proc/cpuinfo, e.g. intel-6-143, amd-25-17);
- a result is JSON (provenance, figures, the report's lines) with the report's text beside it (.txt).

The docs' results page (docs/hooks/results_page.py) prints the provenance next to every number; results
written before benchmarks stored their own take it from benchmarks/results/provenance.yaml.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path
from statistics import median
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
"""The vector units that decide which kernels torch runs (and so which figures compare)."""
UNKNOWN_HOST = "unknown-host"
_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}


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


def cpu_fields(cpuinfo: str) -> dict[str, str]:
    """The first processor's `key: value` lines of a /proc/cpuinfo text."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def host_slug(cpuinfo: str) -> str:
    """vendor-family-model of a /proc/cpuinfo text (e.g. 'intel-6-143', 'amd-25-17'); 'unknown-host' when
    the text does not say. Deterministic, and the same for every machine of one CPU generation."""
    fields = cpu_fields(cpuinfo)
    vendor, family, model = fields.get("vendor_id"), fields.get("cpu family"), fields.get("model")
    if not (vendor and family and model and family.isdigit() and model.isdigit()):
        return UNKNOWN_HOST
    return f"{_VENDORS.get(vendor, vendor.lower())}-{family}-{model}"


def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def host_info(cpuinfo: str | None = None) -> dict[str, Any]:
    """{host, cpu, isa}: the host slug, the CPU's model name and which of ISA_FLAGS it has."""
    text = _read_cpuinfo() if cpuinfo is None else cpuinfo
    fields = cpu_fields(text)
    flags = set(fields.get("flags", "").split())
    return {"host": host_slug(text), "cpu": fields.get("model name") or platform.processor() or "unknown",
            "isa": [flag for flag in ISA_FLAGS if flag in flags]}


INVOKED_AS = ""
"""`python -m benchmarks run NAME` while the entry point runs benchmark NAME (runpy puts the file in argv[0])."""


def command_line(argv: list[str] | None = None) -> str:
    """The command that runs this benchmark again: `python -m benchmarks run NAME ARGS` when the entry point
    started it, else `python ARGV`."""
    argv = sys.argv if argv is None else argv
    head = INVOKED_AS or ("python " + shlex.quote(argv[0]) if argv else "python")
    return " ".join([head, *(shlex.quote(a) for a in argv[1:])])


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def provenance() -> dict[str, Any]:
    """{commit, command, date, load_average, host, cpu, isa, torch, threads} of the running benchmark."""
    try:
        import torch
        torch_version, threads = torch.__version__, torch.get_num_threads()
    except ImportError:
        torch_version, threads = "not installed", os.cpu_count() or 0
    return {"commit": git_commit(), "command": command_line(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_average": f"{_load():.1f}",
            **host_info(), "torch": torch_version, "threads": threads}


def default_out(benchmark: str, name: str | None = None) -> Path:
    """benchmarks/results/<benchmark>/<host>/<name or benchmark>.json."""
    return RESULTS / benchmark / host_info()["host"] / f"{name or benchmark}.json"


_STARTED: dict[str, Any] | None = None
"""The provenance taken when the running benchmark added its --out argument (see `write_result`)."""


class _DeprecatedOutput(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001 (argparse's signature)
        warnings.warn("--output is deprecated: use --out", DeprecationWarning, stacklevel=2)
        print("warning: --output is deprecated, use --out", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_out_argument(parser: argparse.ArgumentParser, benchmark: str, name: str | None = None) -> None:
    """`--out PATH`, the result's path (default benchmarks/results/<benchmark>/<host>/<name>.json; a .txt
    path writes the text there and the JSON beside it), and `--output`, its deprecated alias."""
    global _STARTED
    _STARTED = provenance()  # a benchmark adds --out as it starts: its provenance, load at start included
    parser.add_argument("--out", default=str(default_out(benchmark, name)),
                        help="result file (.json, with the text beside it as .txt; default: %(default)s)")
    parser.add_argument("--output", dest="out", action=_DeprecatedOutput, help=argparse.SUPPRESS)


def write_result(path: str | Path, lines: list[str], figures: dict[str, Any] | None = None,
                 meta: dict[str, Any] | None = None) -> Path:
    """The report written twice: JSON ({provenance, figures, lines}) at `path` or beside it, and its text at
    the .txt beside it (or at `path` when that ends .txt). Returns the JSON's path. `meta` defaults to the
    provenance taken when the benchmark added its --out argument."""
    path = Path(path)
    json_path, text_path = path.with_suffix(".json"), path.with_suffix(".txt")
    if path.suffix not in (".json", ".txt"):
        json_path, text_path = Path(f"{path}.json"), path
    json_path.parent.mkdir(parents=True, exist_ok=True)
    meta = dict(meta or _STARTED or provenance())
    meta["load_at_end"] = f"{_load():.1f}"
    json_path.write_text(json.dumps({"provenance": meta, "figures": figures or {}, "lines": lines}, indent=1) + "\n")
    text_path.write_text("\n".join(lines) + "\n")
    return json_path


class _Tee(io.TextIOBase):
    def __init__(self, stream: Any) -> None:
        self.stream, self.text = stream, io.StringIO()

    def write(self, chunk: str) -> int:
        self.text.write(chunk)
        return self.stream.write(chunk)

    def flush(self) -> None:
        self.stream.flush()


@contextlib.contextmanager
def printed_report(path: str | Path, figures: dict[str, Any] | None = None) -> Iterator[None]:
    """For a benchmark that prints its report: what it prints inside the block still goes to stdout and is
    written to `path` as a result (see `write_result`) when the block ends, provenance taken at its start."""
    meta, tee = provenance(), _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield
    write_result(path, tee.text.getvalue().splitlines(), figures, meta)


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a benchmark's own worker process (`python -m benchmarks.NAME --worker ...`): the
    repository root and src/ on PYTHONPATH, so that the worker imports this checkout whatever its cwd."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    return env


class Lines:
    """A benchmark's report: each line printed as it comes and kept, then written to a results file."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.meta: dict[str, Any] = {}

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        self.lines.append(line)

    @classmethod
    def started(cls) -> "Lines":
        """A report whose first lines say where it came from: command, commit, date and load at start, then
        the host, its CPU and vector units, torch's version and its threads."""
        meta, lines = provenance(), cls()
        lines.meta = meta
        lines(f"# {meta['command']} at {meta['commit']}, {meta['date']}, load {meta['load_average']} at start")
        lines(header_host_line(meta))
        return lines

    def write(self, path: str | Path, figures: dict[str, Any] | None = None) -> Path:
        """The report as JSON and text (see `write_result`)."""
        return write_result(path, self.lines, figures, self.meta or None)

    def finish(self, path: str | Path = "", figures: dict[str, Any] | None = None) -> None:
        """The closing load-average line, then the report written to `path` (when given)."""
        self(f"load {_load():.1f} at end")
        if path:
            self.write(path, figures)


def header_host_line(meta: dict[str, Any]) -> str:
    """'# host amd-25-17 (AMD EPYC ...; avx2 avx512f), torch 2.x, 4 threads'."""
    isa = " ".join(meta["isa"]) or "no avx2"
    return f"# host {meta['host']} ({meta['cpu']}; {isa}), torch {meta['torch']}, {meta['threads']} thread{'' if meta['threads'] == 1 else 's'}"


def spread(values: list[float], fmt: str = "6.2f", scale: float = 1.0) -> str:
    """'min A median B max C' of `values` (each times `scale`), formatted with `fmt`."""
    low, mid, high = (scale * v for v in (min(values), median(values), max(values)))
    return f"min {low:{fmt}} median {mid:{fmt}} max {high:{fmt}}"
