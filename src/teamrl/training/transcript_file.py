"""The collaboration-transcript file: JSONL, one line per agent turn, for offline SFT (`teamrl sft`).

Every line is one JSON object holding the format's name and version (so a line read alone is still
checkable), where the turn came from, and the (prompt, response) pair a policy is trained on:

    {"format": "teamrl-transcripts", "version": 1, "source": "scripted:strong", "task": "split_calc",
     "split": "train", "instance": 17, "episode": 0, "turn": 0, "agent": "analyst", "role": "analyst",
     "policy": "", "prompt": "...", "response": "x*(y+1)", "reward": 1.0, "success": true}

`prompt` is the workflow's rendered text, before any chat template (the trainer wraps it exactly as
the rollout does); `policy` is the policy that spoke (empty for a scripted agent); `reward` is the
turn's committed reward (team + local) and `success` the episode's outcome.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from teamrl.config import ConfigError
from teamrl.workflows.base import Prompt

FORMAT = "teamrl-transcripts"
VERSION = 1


class TranscriptFormatError(ConfigError):
    """A transcript file is empty, of another format or version, or has a malformed line.

    A ConfigError, so the CLI reports it as bad input: one line, exit code 2."""


@dataclass(frozen=True)
class TurnRecord:
    """One agent turn of one episode."""

    source: str  # "scripted:strong", or "run:<checkpoint folder>"
    task: str
    split: str
    instance: int
    episode: int  # index of the episode in the file (several episodes may share an instance)
    turn: int
    agent: str
    role: str
    policy: str
    prompt: Prompt  # the role's prompt: text, or chat messages (a workflow with chat prompts)
    response: str
    reward: float
    success: bool

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "version": VERSION, **asdict(self)})


_TYPES: dict[str, type | tuple[type, ...]] = {
    "instance": int,
    "episode": int,
    "turn": int,
    "reward": (int, float),
    "success": bool,
}


def _is_prompt(value: object) -> bool:
    """Text, or chat messages: a list of {"role": str, "content": str} objects."""
    if isinstance(value, str):
        return True
    return isinstance(value, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value
    )


def parse_line(text: str, where: str) -> TurnRecord:
    """One line of a transcript file; `where` ("FILE:LINE") names it in the error."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise TranscriptFormatError(
            f"{where}: not a JSON object ({err.msg}); each line must be one turn written by `teamrl transcripts`"
        ) from err
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise TranscriptFormatError(
            f'{where}: not a {FORMAT} line (its "format" is '
            f"{raw.get('format') if isinstance(raw, dict) else None!r}); "
            "make the file with `teamrl transcripts`"
        )
    if raw.get("version") != VERSION:
        raise TranscriptFormatError(
            f"{where}: transcript format version {raw.get('version')!r}, this teamrl "
            f"reads version {VERSION}; regenerate the file with `teamrl transcripts`"
        )
    names = [f.name for f in fields(TurnRecord)]
    missing = [n for n in names if n not in raw]
    if missing:
        raise TranscriptFormatError(f"{where}: missing field(s) {', '.join(missing)}")
    for name in names:
        if name == "prompt":
            if not _is_prompt(raw[name]):
                raise TranscriptFormatError(
                    f"{where}: field 'prompt' = {raw[name]!r:.200} is neither text nor a "
                    'list of {"role": ..., "content": ...} messages'
                )
            continue
        want = _TYPES.get(name, str)
        # bool is an int in Python: a count given as true/false is still wrong.
        bad_bool = want is not bool and isinstance(raw[name], bool)
        if not isinstance(raw[name], want) or bad_bool:
            raise TranscriptFormatError(f"{where}: field {name!r} = {raw[name]!r} has the wrong type")
    if not raw["response"]:
        raise TranscriptFormatError(f"{where}: empty response; there is nothing to learn from it")
    return TurnRecord(**{n: raw[n] for n in names})


def write_transcripts(path: Path, records: list[TurnRecord]) -> Path:
    """Write `records` to `path` (created with its folder; an existing file is replaced)."""
    if not records:
        raise TranscriptFormatError(
            f"no turn to write to {path}: every episode was filtered out (more --episodes, or drop --only-successes)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text("".join(r.to_json() + "\n" for r in records))
    partial.rename(path)  # an interrupted write never leaves a short file under the real name
    return path


def read_transcripts(path: Path) -> list[TurnRecord]:
    """Every turn of a transcript file, checked line by line (blank lines are skipped)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"transcript file {path} does not exist; make one with "
            "`teamrl transcripts CONFIG --from scripted --out FILE`"
        )
    records = [
        parse_line(line, f"{path}:{number}")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if line.strip()
    ]
    if not records:
        raise TranscriptFormatError(
            f"transcript file {path} holds no turn; make it again with "
            "`teamrl transcripts` (more --episodes, or without --only-successes)"
        )
    return records
