"""Read back what each experiment tracker wrote, from its own files, to check teamrl's tracker output."""

from __future__ import annotations

import json
import sqlite3
import struct
import time
from pathlib import Path

# A .wandb file: ":W&B", magic 0xBEE1, version 0, then 32 KiB blocks of records, each with a 7-byte
# header (crc32, length, type: 1 full, 2 first, 3 middle, 4 last) and a protobuf Record as payload.
WANDB_HEADER, WANDB_BLOCK = 7, 32768


def wandb_records(path: Path) -> list:
    """Every protobuf Record of one .wandb file (W&B's offline transaction log)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a .wandb file"
    records, pos, pending = [], WANDB_HEADER, b""
    while pos + 7 <= len(data):
        room = WANDB_BLOCK - pos % WANDB_BLOCK
        if room < 7:  # the rest of a block too short for a header is padding
            pos += room
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:
            break
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def finished_wandb_records(folder: Path, timeout: float = 60.0) -> list:
    """The records of an offline run folder once they include the exit record.

    W&B's service process writes the file after `run.finish()` returns, so a reader may have to wait.
    """
    deadline = time.time() + timeout
    while True:
        records = wandb_records(next(folder.glob("run-*.wandb")))
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.time() > deadline:
            return records
        time.sleep(0.1)


def wandb_history(folder: Path) -> dict[int, dict[str, float]]:
    """{step: {key: value}} of the history rows in an offline run folder."""
    rows: dict[int, dict[str, float]] = {}
    for record in finished_wandb_records(folder):
        if record.WhichOneof("record_type") == "history":
            items = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
            step = items.pop("_step")
            rows.setdefault(step, {}).update({k: v for k, v in items.items() if not k.startswith("_")})
    return rows


def wandb_run(folder: Path) -> dict:
    """The run record's id and config ({key: value}) and the exit code of an offline run folder."""
    found = {}
    for record in finished_wandb_records(folder):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            found["id"] = record.run.run_id
            found["config"] = {i.key: json.loads(i.value_json) for i in record.run.config.update}
        elif kind == "exit":
            found["exit_code"] = record.exit.exit_code
    return found


def trackio_rows(database: Path, run_name: str) -> list[tuple[str, int, dict]]:
    """(run id, step, metrics) of every metrics row of one trackio run, in the order written."""
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT run_id, step, metrics FROM metrics WHERE run_name = ? ORDER BY id",
                          (run_name,)).fetchall()
    return [(run_id, step, json.loads(metrics)) for run_id, step, metrics in rows]


def trackio_config(database: Path, run_id: str) -> dict:
    with sqlite3.connect(database) as db:
        (config,) = db.execute("SELECT config FROM configs WHERE run_id = ?", (run_id,)).fetchone()
    return json.loads(config)


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} of a TensorBoard log folder (after purges of resumed runs)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
