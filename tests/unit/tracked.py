"""A run's metrics as train's tracker leaves them in an output folder, written here the way trackio 0.43
writes them (its SQLite tables `metrics` and `configs`, its JSON Lines inbox fragments), for the readers'
tests in the light install, which has no trackio. The image and compose tests read what trackio wrote."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE metrics (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, timestamp TEXT NOT NULL,
    run_name TEXT NOT NULL, step INTEGER NOT NULL, metrics TEXT NOT NULL, log_id TEXT, space_id TEXT);
CREATE TABLE configs (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, run_name TEXT NOT NULL,
    config TEXT NOT NULL, created_at TEXT NOT NULL, UNIQUE(run_id));
"""


def database(output_dir: Path, project: str = "grpo") -> Path:
    folder = output_dir / "trackio"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{project}.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(SCHEMA)
    return path


def log(path: Path, run: str, step: int, values: dict[str, Any], log_id: str | None = None) -> str:
    """One row as TrackioCallback logs it: the trainer's values under train/, and train/global_step."""
    log_id = log_id or uuid.uuid4().hex
    row = (run, f"2026-01-01T00:00:{step % 60:02d}", run, step, json.dumps(values), log_id)
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO metrics (run_id, timestamp, run_name, step, metrics, log_id)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            row,
        )
    return log_id


def config(path: Path, run: str, values: dict[str, Any]) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO configs (run_id, run_name, config, created_at) VALUES (?, ?, ?, ?)",
            (run, run, json.dumps(values), "2026-01-01T00:00:00"),
        )


def fragment(output_dir: Path, run: str, step: int, values: dict[str, Any], log_id: str | None = None) -> str:
    """One record as trackio's FragmentWriter appends it on a network filesystem."""
    log_id = log_id or uuid.uuid4().hex
    writer = output_dir / "trackio" / "inbox" / "writer0"
    writer.mkdir(parents=True, exist_ok=True)
    count = len(list(writer.glob("*.jsonl")))
    record = {"v": 1, "kind": "metric", "project": "grpo", "run": run, "run_id": run, "metrics": values}
    record |= {"step": step, "timestamp": "2026-01-01T00:01:00", "config": None, "log_id": log_id}
    (writer / f"{count:08d}.jsonl").write_text(json.dumps(record) + "\n")
    return log_id


def train_row(step: int, **values: Any) -> dict[str, Any]:
    return {**{f"train/{key}": value for key, value in values.items()}, "train/global_step": step}
