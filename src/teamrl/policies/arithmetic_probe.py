"""Which CPU arithmetic is fastest on this host, measured once and cached: fp32 via MKL, fp32 via oneDNN, bf16.

ISA flags do not predict it: on an AVX2-only Zen 3 oneDNN ran slower than MKL and bf16 11x slower than fp32; on
a full-width AVX-512 host oneDNN ran 2.14x MKL; on a Zen 4 bf16 ran 2x fp32 (docs/performance/arithmetic.md).
`measure` times a few matmuls at a decode shape (16 rows, SmolLM2-135M's 576 -> 1536 projection) and an update
shape (256 rows of it) through each path, in CPU seconds, about a fifth of a second in all. The figures and the
choices drawn from them are written as JSON under the teamrl cache folder, keyed by a host description (CPU
model, ISA flags, torch version and CPU capability): every later run on the host reads them back, so two runs
on one host take the same path, and a new torch or another CPU measures again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

PATHS = ("mkl_fp32", "onednn_fp32", "bf16")
SHAPES = {"decode": (16, 576, 1536), "update": (256, 576, 1536)}  # rows, in, out
ONEDNN_MARGIN = 1.1
"""oneDNN fp32 replaces MKL where it measured at least this many times as fast (below it the two are a tie)."""
BF16_MARGIN = 1.3
"""The sampler goes bf16 (`rollout.sampler_dtype: auto`) where bf16 decoded at least this many times as fast as
the faster fp32 path: a smaller gain does not pay for the rounding it adds."""
PROBE_SECONDS = 0.02
"""CPU seconds spent on each (path, shape) pair."""

Timer = Callable[[str, tuple[int, int, int]], float]
"""(path, (rows, in, out)) -> GFLOP per CPU second."""


def cache_folder() -> Path:
    """Where the probe's results live: `$TEAMRL_CACHE/arithmetic` (the cache folder of the rest of teamrl)."""
    return Path(os.environ.get("TEAMRL_CACHE", Path.home() / ".cache" / "teamrl")) / "arithmetic"


def _cpu_model_and_flags() -> tuple[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), ""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)  # the last CPU's lines win
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    flags = " ".join(sorted((fields.get("flags") or fields.get("Features") or "").split()))
    return fields.get("model name", platform.machine()), flags


def host_description() -> dict[str, str]:
    """What the probe's result depends on: CPU model, ISA flags, torch version and torch's CPU capability."""
    model, flags = _cpu_model_and_flags()
    return {
        "cpu": model,
        "flags": flags,
        "torch": torch.__version__,
        "capability": torch.backends.cpu.get_cpu_capability(),
    }


def host_key(description: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ArithmeticProbe:
    """A host's measured GFLOP per CPU second for each path and shape, and what they choose."""

    key: str
    host: dict[str, str]
    gflops: dict[str, dict[str, float]]  # path -> shape -> GFLOP per CPU second
    cpu_linear: str  # onednn or torch: `policy.cpu_linear: measured`
    sampler_dtype: str  # bfloat16 or float32: `rollout.sampler_dtype: auto`
    threads: int

    def summary(self) -> str:
        """One line for train.log: the figures and the choices."""
        parts = [
            f"{shape} " + ", ".join(f"{path} {self.gflops[path][shape]:.1f}" for path in PATHS) for shape in SHAPES
        ]
        return (
            f"arithmetic probe ({self.host['cpu']}, {self.threads} thread(s); GFLOP per CPU second): "
            f"{'; '.join(parts)} -> cpu_linear {self.cpu_linear}, sampler {self.sampler_dtype}"
        )

    def metrics(self) -> dict[str, float]:
        """The figures and choices as run metrics (`arith/...`)."""
        out = {
            f"arith/{path}/{shape}_gflops": value for path, row in self.gflops.items() for shape, value in row.items()
        }
        return out | {
            "arith/onednn": float(self.cpu_linear == "onednn"),
            "arith/sampler_bf16": float(self.sampler_dtype == "bfloat16"),
        }


def time_matmul(path: str, shape: tuple[int, int, int], seconds: float = PROBE_SECONDS) -> float:
    """GFLOP per CPU second of x [rows, in] @ W [out, in]^T through `path` (0.0 where the path is missing)."""
    rows, width, out = shape
    generator = torch.Generator().manual_seed(0)
    x, weight = torch.randn(rows, width, generator=generator), torch.randn(out, width, generator=generator) / 30
    if path == "mkl_fp32":
        run = lambda: F.linear(x, weight)  # noqa: E731
    elif path == "onednn_fp32":
        op = getattr(torch.ops.mkldnn, "_linear_pointwise", None) if torch.backends.mkldnn.is_available() else None
        if op is None:
            return 0.0
        run = lambda: op(x, weight, None, "none", [], "")  # noqa: E731
    elif path == "bf16":
        x16, w16 = x.bfloat16(), weight.bfloat16()
        run = lambda: F.linear(x16, w16)  # noqa: E731
    else:
        raise ValueError(f"unknown arithmetic path {path!r}; one of {', '.join(PATHS)}")
    with torch.no_grad():
        try:
            run()  # first call: kernel selection and allocation, not timed
        except (RuntimeError, NotImplementedError):
            return 0.0  # a torch without this path
        calls, started = 0, time.process_time()
        while (spent := time.process_time() - started) < seconds or calls < 3:
            run()
            calls += 1
    return 2 * rows * width * out * calls / max(spent, 1e-9) / 1e9


def choose(gflops: dict[str, dict[str, float]]) -> tuple[str, str]:
    """(cpu_linear, sampler_dtype) from the figures: oneDNN where it beat MKL by `ONEDNN_MARGIN` at the update
    shape (the trainer's matmuls); bf16 where it beat the faster fp32 path by `BF16_MARGIN` at the decode shape."""
    mkl, onednn, bf16 = (gflops[path] for path in PATHS)
    cpu_linear = "onednn" if onednn["update"] >= ONEDNN_MARGIN * mkl["update"] > 0 else "torch"
    fp32_decode = max(mkl["decode"], onednn["decode"])
    sampler = "bfloat16" if bf16["decode"] >= BF16_MARGIN * fp32_decode > 0 else "float32"
    return cpu_linear, sampler


def measure(timer: Timer | None = None) -> ArithmeticProbe:
    """Time every path at every shape on this host (no cache); timer: `time_matmul` unless given."""
    timer = timer or time_matmul
    host = host_description()
    gflops = {path: {name: float(timer(path, shape)) for name, shape in SHAPES.items()} for path in PATHS}
    cpu_linear, sampler = choose(gflops)
    return ArithmeticProbe(host_key(host), host, gflops, cpu_linear, sampler, torch.get_num_threads())


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(prefix=f"{path.name}.partial-", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.replace(partial, path)  # a reader sees the old file or the whole new one
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def _read(path: Path, key: str) -> ArithmeticProbe | None:
    try:
        data = json.loads(path.read_text())
        probe = ArithmeticProbe(**data)
    except (OSError, ValueError, TypeError):
        return None  # missing, or a file of another layout: measured again
    return probe if probe.key == key else None


def cached_probe(timer: Timer | None = None) -> ArithmeticProbe:
    """This host's probe: read from the cache when its key matches the host, else measured and written there."""
    key = host_key(host_description())
    path = cache_folder() / f"probe-{key}.json"
    probe = _read(path, key)
    if probe is None:
        probe = measure(timer)
        _write_atomically(path, json.dumps(asdict(probe), indent=1, sort_keys=True) + "\n")
    return probe


@functools.lru_cache(maxsize=1)
def host_probe() -> ArithmeticProbe:
    """`cached_probe()` once per process: what `measured` and `auto` settings resolve against."""
    return cached_probe()


def resolve_sampler_dtype(setting: str, device: str | torch.device = "cpu") -> str:
    """float32 or bfloat16: the arithmetic of the built-in sampler for `rollout.sampler_dtype`; auto is the
    probe's choice on a CPU and float32 elsewhere."""
    if setting not in ("float32", "bfloat16", "auto"):
        raise ValueError(f"sampler_dtype must be float32, bfloat16 or auto, got {setting!r}")
    if setting != "auto":
        return setting
    return host_probe().sampler_dtype if torch.device(device).type == "cpu" else "float32"
