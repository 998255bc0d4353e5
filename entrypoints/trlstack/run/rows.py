"""The first rows of a local data file, read the way `datasets` would give them to a trainer, in milliseconds
and without `datasets` or torch: JSON Lines, JSON and CSV with the standard library, Parquet and arrow (a
saved `datasets` folder) with pyarrow where it is installed (the image has it; the light install does not).

CSV values come as `datasets` types them (through pandas): whole numbers as int, other numbers as float, an
empty field as None, the rest as text.
"""

from __future__ import annotations

import csv
import importlib.util
import itertools
import json
from pathlib import Path
from typing import Any

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
