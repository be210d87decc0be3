"""Reading a run directory back: config, metrics.jsonl, summary.json and eval transcripts.

Everything here validates as it reads, because a report built from half-parsed data would
quietly show wrong curves; a bad file fails with its path (and line, for metrics.jsonl).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ReportError(ValueError):
    """A run directory is missing, or one of its files cannot be read as the trainer writes it."""


Series = list[tuple[int, float]]
_TRANSCRIPT_NAME = re.compile(r"eval_step(\d+)\.json$")
_TRAIN_TRANSCRIPT_NAME = re.compile(r"train_step(\d+)\.json$")


@dataclass
class RunData:
    """One run directory, parsed. Optional files that are absent are None / empty, never guessed."""

    path: Path
    name: str
    metrics: list[dict[str, Any]]
    config_text: str | None = None
    config: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    # eval step -> saved held-out episodes; all read up front so a bad file fails before writing.
    transcripts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    # eval step -> training episodes of that step, each turn with its reward and advantage.
    train_transcripts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    # alerts.jsonl: {"step", "kind", "subject", "message"} per alert, in the order raised.
    alerts: list[dict[str, Any]] = field(default_factory=list)

    def series(self, key: str) -> Series:
        """(step, value) for every metrics line that logged `key` with a finite value, by step."""
        points = [(row["step"], row[key]) for row in self.metrics if row.get(key) is not None]
        return sorted(points, key=lambda p: p[0])

    def keys(self) -> list[str]:
        """Every metric name logged at least once, in first-seen order."""
        return list(dict.fromkeys(k for row in self.metrics for k in row if k != "step"))

    def names_under(self, prefix: str, suffix: str) -> list[str]:
        """The middle parts of keys shaped `<prefix><middle><suffix>`, e.g. agents of role/*/reward."""
        return [
            k[len(prefix) : len(k) - len(suffix)]
            for k in self.keys()
            if k.startswith(prefix) and k.endswith(suffix) and len(k) > len(prefix) + len(suffix)
        ]

    def one_step_updates(self) -> bool:
        """Whether every logged update was a single optimizer step on freshly sampled data.

        With algorithm.ppo_epochs 1 and each policy's samples of a step within one minibatch
        (policy/<p>/samples <= algorithm.minibatch_size), the update scores its samples with the
        weights that sampled them: the PPO ratio is 1, so the clip fraction is 0 by construction.
        False when the config or the sample counts are missing (nothing is claimed then).
        """
        algo = (self.config or {}).get("algorithm")
        if not isinstance(algo, dict):
            return False
        epochs, size = algo.get("ppo_epochs", 1), algo.get("minibatch_size", 256)
        counts = [v for p in self.names_under("policy/", "/samples") for _, v in self.series(f"policy/{p}/samples")]
        return epochs == 1 and isinstance(size, int) and bool(counts) and max(counts) <= size

    def headline(self) -> "Headline":
        """Initial / peak / final held-out success etc., from summary.json or, lacking it, metrics."""
        return Headline.of(self)


@dataclass
class Headline:
    """The numbers a comparison table shows for one run; `from_summary` says where they came from."""

    initial: float | None
    peak: float | None
    final: float | None
    best_step: int | None
    steps: int | None
    train_seconds: float | None
    from_summary: bool

    @classmethod
    def of(cls, run: RunData) -> "Headline":
        s = run.summary
        if s is not None:
            return cls(
                s.get("initial_success"),
                s.get("best_success"),
                s.get("final_success"),
                s.get("best_step"),
                s.get("steps"),
                s.get("train_seconds"),
                True,
            )
        # An unfinished run has no summary.json; recover what the metrics can say.
        evals = run.series("eval/success")
        peak = max(evals, key=lambda p: p[1]) if evals else None
        train_steps = [p[0] for p in run.series("train/success")]
        elapsed = run.series("time/elapsed_s")
        return cls(
            evals[0][1] if evals else None,
            peak[1] if peak else None,
            evals[-1][1] if evals else None,
            peak[0] if peak else None,
            max(train_steps) if train_steps else None,
            elapsed[-1][1] if elapsed else None,
            False,
        )


def load_run(path: str | Path) -> RunData:
    """Parse one run directory; metrics.jsonl is required, the other files are optional."""
    root = Path(path)
    if not root.exists():
        raise ReportError(f"run directory {root} does not exist")
    if not root.is_dir():
        raise ReportError(f"{root} is not a directory (expected a run directory)")
    metrics_path = root / "metrics.jsonl"
    if not metrics_path.is_file():
        raise ReportError(f"{root} has no metrics.jsonl; is it a teamrl run directory?")
    config_path = root / "config.yaml"
    summary_path = root / "summary.json"
    config_text = config_path.read_text(encoding="utf-8") if config_path.is_file() else None
    return RunData(
        path=root,
        name=root.resolve().name,
        metrics=load_metrics(metrics_path),
        config_text=config_text,
        config=_parse_config(config_path, config_text) if config_text is not None else None,
        summary=_load_summary(summary_path) if summary_path.is_file() else None,
        transcripts={step: load_transcripts(file) for step, file in _find_transcripts(root / "transcripts").items()},
        train_transcripts={
            step: load_transcripts(file)
            for step, file in _find_transcripts(root / "transcripts", _TRAIN_TRANSCRIPT_NAME).items()
        },
        alerts=load_alerts(root / "alerts.jsonl") if (root / "alerts.jsonl").is_file() else [],
    )


def _json_objects(path: Path):
    """(where, object) per line of a JSON-lines file; each line must be one JSON object with an integer `step`."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            where = f"{path}, line {number}"
            if not line.strip():
                raise ReportError(f"{where}: empty line (every line should be one JSON object)")
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ReportError(f"{where}: not valid JSON ({err.msg} at column {err.colno})") from None
            if not isinstance(row, dict):
                raise ReportError(f"{where}: expected a JSON object, got {type(row).__name__}")
            step = row.get("step")
            if isinstance(step, bool) or not isinstance(step, int):
                raise ReportError(f"{where}: missing or non-integer 'step' ({step!r})")
            yield where, row


def load_metrics(path: Path) -> list[dict[str, Any]]:
    """Every line must be a JSON object with an integer `step` and number-or-null values."""
    rows: list[dict[str, Any]] = []
    for where, row in _json_objects(path):
        for key, value in row.items():
            if key == "step" or value is None:
                continue
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ReportError(f"{where}: {key!r} should be a finite number or null, got {value!r}")
            row[key] = float(value)
        rows.append(row)
    if not rows:
        raise ReportError(f"{path} is empty: the run logged no metrics yet")
    return rows


def _parse_config(path: Path, text: str) -> dict[str, Any]:
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ReportError(f"{path}: not valid YAML ({err})") from None
    if not isinstance(config, dict):
        raise ReportError(f"{path}: expected a mapping of config sections, got {type(config).__name__}")
    return config


def _load_summary(path: Path) -> dict[str, Any]:
    summary = _read_json(path)
    if not isinstance(summary, dict):
        raise ReportError(f"{path}: expected a JSON object, got {type(summary).__name__}")
    return summary


def _find_transcripts(folder: Path, pattern: re.Pattern = _TRANSCRIPT_NAME) -> dict[int, Path]:
    if not folder.is_dir():
        return {}
    found = {}
    for file in folder.iterdir():
        match = pattern.search(file.name)
        if match:
            found[int(match.group(1))] = file
    return dict(sorted(found.items()))


def load_transcripts(path: Path) -> list[dict[str, Any]]:
    """A list of episodes, each with `turns`; checked shallowly so the page never half-renders."""
    episodes = _read_json(path)
    if not isinstance(episodes, list):
        raise ReportError(f"{path}: expected a list of episodes, got {type(episodes).__name__}")
    for index, episode in enumerate(episodes):
        if not isinstance(episode, dict) or not isinstance(episode.get("turns"), list):
            raise ReportError(f"{path}: episode {index} is not an object with a 'turns' list")
        for turn in episode["turns"]:
            if not isinstance(turn, dict):
                raise ReportError(f"{path}: episode {index} has a turn that is not an object")
    return episodes


def load_alerts(path: Path) -> list[dict[str, Any]]:
    """alerts.jsonl: one object per line with an integer `step` and string `kind` and `message`."""
    alerts = []
    for where, alert in _json_objects(path):
        for key in ("kind", "message"):
            if not isinstance(alert.get(key), str):
                raise ReportError(f"{where}: missing or non-text {key!r}")
        alerts.append(alert)
    return alerts


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ReportError(f"{path}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
