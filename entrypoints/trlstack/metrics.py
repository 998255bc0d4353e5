"""A run's metrics: their names, where train records them and how to read them back without the tracker.

train records every run's metrics with trackio in the run's output folder (run/tracking.py), in `trackio/`
beside the checkpoints, so they travel with them and a resumed run continues the same curves:

- `trackio/PROJECT.db`: SQLite, table `metrics`, one row per log call (`run_name`, `step`, `timestamp`, the
  values as a JSON object; trackio writes NaN and infinities as the strings "NaN", "Infinity");
- `trackio/inbox/WRITER/N.jsonl`: where trackio finds the folder on a network filesystem it appends JSON
  Lines fragments instead (`{"kind": "metric", "run": ..., "step": ..., "metrics": {...}, "log_id": ...}`),
  which a dashboard imports into the database later (and deletes); a row and its fragment share `log_id`.

Reading is the standard library's (sqlite3, json), read-only, so `trlstack report` works on a laptop from a
copied folder, without trackio or the GPU stack. transformers' tracker callback prefixes every trainer metric
with `train/` and adds `train/global_step`, the trainer's step, which the readers use as the x axis.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METRICS_DIR = "trackio"  # in the output folder
TRAIN_PREFIX = "train/"  # transformers' TrackioCallback (rewrite_logs)
GLOBAL_STEP = "train/global_step"

# The step split every run logs (rank/watch.py): seconds per optimizer step, each the mean over the steps of
# one logging interval. The parts and `other` add up to `step`.
STEP_S = "time/step_s"
STEP_PARTS = (
    ("time/generation_s", "generation"),  # vLLM (or transformers) generating; in server mode the wait for it
    ("time/weight_push_s", "weight push"),  # the new weights into vLLM (server or colocated engine)
    ("time/forward_backward_s", "forward + backward"),  # the loss's forward and its backward
    ("time/optimizer_s", "optimizer"),
    ("time/wait_s", "waiting for data"),  # async-grpo: for the rollout worker's samples
    ("time/checkpoint_s", "checkpoint"),
    ("time/other_s", "other"),  # rewards, old and reference log-probabilities, logging, the rest
)
COMPLETIONS_PER_S = "throughput/completions_per_s"
TOKENS_PER_S = "throughput/tokens_per_s"
MEMORY_PEAK = "memory/peak_gib/rank"  # + the rank: torch's peak of allocated GPU memory since the start
SERVER_PREFIX = "server/"  # the vLLM server's Prometheus metrics, in server mode (rank/server_metrics.py)


@dataclass(frozen=True)
class Store:
    """One run's trackio folder: `name` the output folder's name, `database` its PROJECT.db (None: fragments
    only so far)."""

    name: str
    folder: Path
    database: Path | None


@dataclass
class Run:
    """One tracked run: its rows in step order (each the values logged at once) and its config."""

    name: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    def series(self, key: str) -> list[tuple[float, float]]:
        """(trainer step, value) of every row that holds a number for `key` (`train/` added where needed)."""
        found = []
        for row in self.rows:
            value = row.get(key, row.get(TRAIN_PREFIX + key))
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                found.append((float(row.get(GLOBAL_STEP, row["_step"])), float(value)))
        return found

    def names(self) -> set[str]:
        return {key.removeprefix(TRAIN_PREFIX) for row in self.rows for key in row if not key.startswith("_")}


def metrics_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / METRICS_DIR


def find_stores(folder: Path) -> list[Store]:
    """The runs recorded under `folder`: the run itself (it holds trackio/), or the output folders in it
    (compose's outputs/, a folder of runs), in name order."""
    if metrics_dir(folder).is_dir():
        candidates = [folder]
    else:
        candidates = sorted(path for path in folder.iterdir() if path.is_dir())
    stores = []
    for run in candidates:
        where = metrics_dir(run)
        if not where.is_dir():
            continue
        databases = sorted(where.glob("*.db"))
        stores.append(Store(run.name, where, databases[0] if databases else None))
    return stores


def _value(raw: Any) -> Any:
    special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    return special.get(raw, raw) if isinstance(raw, str) else raw


def _database_rows(database: Path) -> tuple[list[tuple[Any, Any, Any, Any, str]], dict[str, Any]]:
    """(run, step, timestamp, values, log_id) of every metrics row, and each run's config, read-only."""
    connection = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT run_name, step, timestamp, metrics, COALESCE(log_id, '') FROM metrics ORDER BY id"
        ).fetchall()
        try:
            configs = dict(connection.execute("SELECT run_name, config FROM configs").fetchall())
        except sqlite3.OperationalError:  # no config logged yet
            configs = {}
    finally:
        connection.close()
    found = [(run, step, stamp, json.loads(values), log_id) for run, step, stamp, values, log_id in rows]
    return found, {run: json.loads(config) for run, config in configs.items()}


def _fragment_rows(inbox: Path) -> list[tuple[Any, Any, Any, Any, str]]:
    """The metric records of the fragments not yet imported, in the order each writer wrote them."""
    found = []
    for fragment in sorted(inbox.glob("*/*.jsonl")):
        for line in fragment.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if isinstance(record, dict) and record.get("kind") == "metric":
                row = (record.get("run"), record.get("step"), record.get("timestamp"), record.get("metrics"))
                found.append((*row, record.get("log_id") or ""))
    return found


def read_runs(store: Store) -> list[Run]:
    """Every run in `store`, in the order they started, with the rows of the database and the fragments.
    sqlite3.Error passes on for a database that is not trackio's (or is damaged)."""
    rows, configs = _database_rows(store.database) if store.database is not None else ([], {})
    seen = {log_id for *_, log_id in rows if log_id}
    rows += [row for row in _fragment_rows(store.folder / "inbox") if not row[-1] or row[-1] not in seen]
    runs: dict[str, Run] = {}
    for name, step, stamp, values, _ in rows:
        if not isinstance(values, dict) or name is None:
            continue
        run = runs.setdefault(str(name), Run(str(name), config=configs.get(name, {})))
        run.rows.append({**{k: _value(v) for k, v in values.items()}, "_step": step, "_time": stamp})
    for run in runs.values():
        run.rows.sort(key=lambda row: (row.get(GLOBAL_STEP, row["_step"]) or 0, row["_step"] or 0))
    return list(runs.values())
