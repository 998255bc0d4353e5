"""The first rows of a task's data, read the way `datasets` would give them to a trainer, in milliseconds and
without `datasets` or torch: JSON Lines, JSON and CSV with the standard library, Parquet and arrow (a saved
`datasets` folder) with pyarrow where it is installed (the image has it; the light install does not); and
the task check's data step (`check_data`): each dataset the config names found, its first rows read and held
to the columns the trainer reads.

CSV values come as `datasets` types them (through pandas): whole numbers as int, other numbers as float, an
empty field as None, the rest as text.
"""

from __future__ import annotations

import csv
import importlib.util
import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trlstack.recipes import Recipe
from trlstack.reward_calls import shown_path
from trlstack.run import task
from trlstack.run.task_report import Problem, Report, Rows, Task

Row = dict[str, Any]


class Unreadable(Exception):
    """The file cannot be read as its kind; str() says why and how to fix it."""


class NotHere(Exception):
    """This install lacks what reads the file (pyarrow); str() says how to check it anyway."""


def first_rows(path: Path, builder: str, count: int) -> list[Row]:
    """Up to `count` rows of `path` as `builder` (json, csv, parquet, arrow) reads it."""
    reader = {"json": _json, "csv": _csv, "parquet": _parquet, "arrow": _arrow}.get(builder)
    if reader is None:
        raise Unreadable(f"no reader for {builder} files")
    try:
        rows = reader(path, count)
    except (OSError, UnicodeDecodeError) as error:
        raise Unreadable(f"cannot read it: {error}") from None
    bad = [type(row).__name__ for row in rows if not isinstance(row, dict)]
    if bad:
        raise Unreadable(f"its rows must be objects of named columns, not {bad[0]}")
    return rows


def _json(path: Path, count: int) -> list[Row]:
    """JSON Lines, or one JSON array of rows (or an object holding one under a key), as `datasets` reads
    either from a .json file."""
    with path.open(encoding="utf-8") as file:
        head = file.read(1024).lstrip()
        file.seek(0)
        if head.startswith(("[", "{")) and not _one_object_a_line(head):
            return _whole_json(path, count)
        rows = []
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as error:
                raise Unreadable(f"line {number} is not JSON ({error})") from None
            if len(rows) == count:
                break
        return rows


def _one_object_a_line(head: str) -> bool:
    first = head.split("\n", 1)[0].strip()
    if not first.startswith("{"):
        return False
    try:
        json.loads(first)
    except ValueError:
        return False
    return True


def _whole_json(path: Path, count: int) -> list[Row]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise Unreadable(f"it is not JSON ({error})") from None
    if isinstance(data, dict):  # `datasets` reads an object holding one list of rows ("field")
        lists = [value for value in data.values() if isinstance(value, list)]
        data = lists[0] if len(lists) == 1 else [data]
    return list(data[:count]) if isinstance(data, list) else [data]


def _csv(path: Path, count: int) -> list[Row]:
    with path.open(encoding="utf-8", newline="") as file:
        reader = csv.DictReader(file)
        return [{key: _typed(value) for key, value in row.items()} for row in itertools.islice(reader, count)]


def _typed(value: str | None) -> Any:
    if value is None or value == "":
        return None
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def _need_pyarrow(path: Path) -> None:
    if importlib.util.find_spec("pyarrow") is None:
        raise NotHere(
            f"reading {path.suffix} files needs pyarrow, which this install lacks: `pip install pyarrow` "
            "to check its rows here (the image has it, and train checks them again when it starts)"
        )


def _parquet(path: Path, count: int) -> list[Row]:
    _need_pyarrow(path)
    import pyarrow
    import pyarrow.parquet

    try:
        batches = pyarrow.parquet.ParquetFile(path).iter_batches(batch_size=count)
        return list(next(batches, pyarrow.RecordBatch.from_pylist([])).to_pylist())
    except pyarrow.ArrowException as error:
        raise Unreadable(f"it is not a Parquet file ({error})") from None


def _arrow(path: Path, count: int) -> list[Row]:
    _need_pyarrow(path)
    import pyarrow
    import pyarrow.ipc

    try:
        with pyarrow.ipc.open_stream(path) as stream:
            rows: list[Row] = []
            for batch in stream:
                rows += batch.to_pylist()[: count - len(rows)]
                if len(rows) == count:
                    break
            return rows
    except pyarrow.ArrowException as error:
        raise Unreadable(f"it is not a saved `datasets` arrow file ({error})") from None


# The task check's data step --------------------------------------------------------------------------------


def check_data(found: Task, report: Report) -> None:
    """The first rows of each dataset the config names, checked for the columns the trainer reads; the first
    read is kept in the report, for the rewards to be called on."""
    first: Rows | None = None
    for source in task.sources(found.config, found.root):
        data = _read(source, found, report)
        first = first or data
    report.rows = first or Rows(None, None)


def _read(source: task.Source, found: Task, report: Report) -> Rows:
    key, root = f"{found.where}: {source.key}", found.root
    if source.kind == "hub":
        report.checked.append(
            f"data {source.named} is not local: its rows are checked when the trainer loads it"
        )
        return Rows(None, None)
    if source.kind == "missing":
        fix = f"put it in the task folder {root} or fix the path (relative to the task folder)"
        report.problems.append(Problem(key, f"the data {source.named} does not exist", fix))
        return Rows(None, None)
    if source.kind == "unknown" or not source.builder or not source.files:
        what = f"data {source.named} holds no data file trlstack reads"
        fix = "give JSON Lines (.jsonl), JSON, Parquet or CSV files, or a folder a Dataset was saved to"
        report.problems.append(Problem(key, what, fix))
        return Rows(None, None)
    path = source.files[0]
    shown = shown_path(path, root)
    try:
        read = first_rows(path, source.builder, found.row_count)
    except NotHere as error:
        report.checked.append(f"data {shown} not read: {error}")
        return Rows(None, None)
    except Unreadable as error:
        report.problems.append(Problem(shown, f"{error}", f"fix the file, or give a .{source.builder} file"))
        return Rows(None, None)
    if not read:
        report.problems.append(Problem(shown, "holds no rows", "give it at least one row per batch"))
        return Rows(None, None)
    columns = {column for row in read for column in row}
    _columns(read, columns, found.recipe, shown, report)
    report.checked.append(f"data {shown} (columns {', '.join(sorted(columns))})")
    return Rows(read, columns, shown)


def _columns(read: list[Row], columns: set[str], recipe: Recipe, shown: str, report: Report) -> None:
    have = ", ".join(sorted(columns)) or "none"
    for column in recipe.columns:
        if column not in columns:
            what = f"no column {column}, which the {recipe.name} trainer reads (its columns: {have})"
            fix = f"name the column of prompts `{column}`: a text, or a list of chat messages"
            report.problems.append(Problem(shown, what, fix))
    for number, row in enumerate(read, 1):
        prompt = row.get("prompt")
        chat = isinstance(prompt, list) and all(isinstance(m, Mapping) and "content" in m for m in prompt)
        if "prompt" in row and not (isinstance(prompt, str) or (chat and prompt)):
            what = f"row {number}: prompt is {type(prompt).__name__}"
            fix = 'give a text, or chat messages ([{"role": "user", "content": ...}])'
            report.problems.append(Problem(shown, what, fix))
