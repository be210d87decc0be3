"""A teamrl training run timed step by step, for the side-by-side and scaling benchmarks.

The run is `teamrl.training.loop.train` itself (what `teamrl train` runs), not a copy of its loop,
so a faster engine, update or loop merged later is measured without touching these scripts. Three
probes are added in this process only, none of them in the library:
- the run directory's `log` call, made once at the end of every step, is the step clock: a step's
  wall and CPU seconds are the time between two consecutive `log` calls (rollout, rewards,
  advantages, update, diagnostics and the metrics line, everything a step costs);
- `teamrl.rollout.tree.apply_many` (every verifier call of the rollout driver) is timed: the step's
  `score_s` (verifiers and sandbox);
- `ProgramRunner.run` (the tool role's sandboxed programs) is timed: the step's `sandbox_s`, a part
  of `score_s`.
`metrics.jsonl` already records `time/rollout_s` (sampling and scoring), `time/update_s` (update and
diagnostics) and `time/eval_s` (a held-out evaluation): these are read from the logged metrics.

CPU seconds are those of this process and every descendant, live (the sandbox's workers) or reaped.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class StepRecord:
    """One logged row of a run with the probes' clocks since the previous row."""

    step: int
    wall_s: float  # wall seconds since the previous log call
    cpu_s: float  # CPU seconds of the process tree since the previous log call
    score_s: float  # wall seconds in the rollout driver's verifier calls (sandbox included)
    sandbox_s: float  # wall seconds in sandboxed program runs
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def is_training_step(self) -> bool:
        """A row of a training step (the evaluation-only row of step 0 has no train/ metrics)."""
        return "train/samples" in self.metrics

    @property
    def sampled(self) -> float:
        """Responses sampled and scored in this step (every candidate of every agent)."""
        return float(self.metrics.get("train/samples", 0.0))

    @property
    def trained(self) -> float:
        """Samples that entered some policy's update (`policy/<name>/samples`, summed)."""
        return float(sum(v for k, v in self.metrics.items()
                         if k.startswith("policy/") and k.endswith("/samples") and v is not None))

    @property
    def tokens(self) -> float:
        """Sampled response tokens of the step (tokens per second of the rollout times its seconds)."""
        return float(self.metrics.get("time/tokens_per_s", 0.0)) * float(self.metrics.get("time/rollout_s", 0.0))


def _ticks(pid: str) -> float:
    """utime + stime + cutime + cstime of a live process, in clock ticks (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return float(sum(int(x) for x in fields[11:15]))


def _descendants(root: int) -> list[str]:
    """Process ids under `root` (Linux /proc; [] elsewhere)."""
    children: dict[str, list[str]] = {}
    with contextlib.suppress(OSError):
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                children.setdefault(stat[stat.rindex(")") + 2:].split()[1], []).append(pid)
    out, todo = [], [str(root)]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def tree_cpu_seconds() -> float:
    """CPU seconds of this process, its reaped children and its live descendants (user + system)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = sum(_ticks(pid) for pid in _descendants(os.getpid())) / os.sysconf("SC_CLK_TCK")
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime + live


class _Clock:
    """Wall and CPU time since the last mark, and the probes' accumulated seconds."""

    def __init__(self) -> None:
        self.records: list[StepRecord] = []
        self.score_s = self.sandbox_s = 0.0
        self._wall, self._cpu = time.perf_counter(), tree_cpu_seconds()

    def mark(self, step: int, metrics: dict[str, Any]) -> None:
        wall, cpu = time.perf_counter(), tree_cpu_seconds()
        self.records.append(StepRecord(step, wall - self._wall, cpu - self._cpu, self.score_s, self.sandbox_s,
                                       dict(metrics)))
        self.score_s = self.sandbox_s = 0.0
        self._wall, self._cpu = wall, cpu

    def timed(self, func: Any, slot: str) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                setattr(self, slot, getattr(self, slot) + time.perf_counter() - started)
        return wrapper


@contextlib.contextmanager
def _probes(clock: _Clock) -> Iterator[None]:
    """Install the step clock and the two timers (see the module docstring); removed on exit."""
    from teamrl.rollout import tree
    from teamrl.training import loop
    from teamrl.workflows.program_runner import ProgramRunner

    base = loop.RunDirectory

    class ClockedRunDirectory(base):  # type: ignore[misc, valid-type]
        def log(self, step: int, metrics: dict[str, float]) -> None:
            super().log(step, metrics)
            clock.mark(step, metrics)

    saved = (loop.RunDirectory, tree.apply_many, ProgramRunner.run)
    loop.RunDirectory = ClockedRunDirectory
    tree.apply_many = clock.timed(tree.apply_many, "score_s")
    ProgramRunner.run = clock.timed(ProgramRunner.run, "sandbox_s")
    try:
        yield
    finally:
        loop.RunDirectory, tree.apply_many, ProgramRunner.run = saved


def timed_train(overrides: list[str], output_dir: Path, model_path: str | None = None) -> list[StepRecord]:
    """Run `teamrl train` with `overrides` (plus output_dir, run_name) and return every logged row, timed.

    The first row is the step-0 evaluation; then one row per training step (eval_every=0 keeps
    evaluations out of the steps).
    """
    from teamrl.config import load_config
    from teamrl.training.loop import train

    config = load_config(None, [*overrides, f"output_dir={output_dir}", "run_name=timed"])
    clock = _Clock()
    with _probes(clock):
        train(config, model_path=model_path, progress=False)
    return clock.records


def measured(records: list[StepRecord], warmup_steps: int) -> list[StepRecord]:
    """The training-step rows after the first `warmup_steps` (these pay for first-call costs)."""
    steps = [r for r in records if r.is_training_step]
    if len(steps) <= warmup_steps:
        raise ValueError(f"{len(steps)} training steps logged, none left after {warmup_steps} warm-up steps; "
                         "run more steps or fewer warm-up steps")
    return steps[warmup_steps:]


def save_random_llama(folder: Path, hidden: int, layers: int, heads: int, intermediate: int, seed: int = 0) -> Path:
    """A randomly initialised Llama over teamrl's character vocabulary, saved with save_pretrained."""
    from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model

    tok = build_char_tokenizer()
    model = build_tiny_model(tok, hidden_size=hidden, num_layers=layers, num_heads=heads,
                             intermediate_size=intermediate, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def parameter_count(folder: Path) -> int:
    """Parameters of a saved model (from its config: built on the meta device, nothing allocated)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    return sum(p.numel() for p in model.parameters())
