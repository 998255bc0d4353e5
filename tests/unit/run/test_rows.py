"""run/rows.py: the first rows of a data file, read as `datasets` gives them to a trainer."""

from __future__ import annotations

import importlib.util
import json

import pytest
from trlstack.run import rows

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]
NO_PYARROW = importlib.util.find_spec("pyarrow") is None


def test_json_lines_are_read_a_line_at_a_time_up_to_the_count(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"prompt": CHAT, "answer": n}) + "\n\n" for n in range(5)))
    assert rows.first_rows(path, "json", 2) == [{"prompt": CHAT, "answer": 0}, {"prompt": CHAT, "answer": 1}]


def test_a_json_array_or_an_object_holding_one_is_read_too(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps([{"prompt": "a"}, {"prompt": "b"}, {"prompt": "c"}], indent=2))
    assert rows.first_rows(path, "json", 2) == [{"prompt": "a"}, {"prompt": "b"}]
    path.write_text(json.dumps({"data": [{"prompt": "a"}]}, indent=2))
    assert rows.first_rows(path, "json", 2) == [{"prompt": "a"}]


def test_a_line_that_is_not_json_is_named(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": \n')
    with pytest.raises(rows.Unreadable, match="line 2 is not JSON"):
        rows.first_rows(path, "json", 5)


def test_rows_that_are_not_objects_of_columns_are_refused(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('"just text"\n')
    with pytest.raises(rows.Unreadable, match="objects of named columns, not str"):
        rows.first_rows(path, "json", 5)


def test_csv_values_are_typed_as_datasets_types_them(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("prompt,answer,weight,note\nWhat is 2+3?,5,0.5,\nWhat is 1+1?,2,1.5,x\n")
    assert rows.first_rows(path, "csv", 1) == [
        {"prompt": "What is 2+3?", "answer": 5, "weight": 0.5, "note": None}
    ]


def test_without_pyarrow_a_parquet_file_is_not_read_and_the_hint_says_how(tmp_path, monkeypatch):
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "pyarrow" else real(name))
    with pytest.raises(rows.NotHere, match="pip install pyarrow"):
        rows.first_rows(path, "parquet", 2)


@pytest.mark.skipif(NO_PYARROW, reason="pyarrow is not installed (light install); runs in the image")
def test_parquet_and_a_saved_datasets_arrow_file_are_read_with_pyarrow(tmp_path):
    import pyarrow
    import pyarrow.ipc
    import pyarrow.parquet

    table = pyarrow.Table.from_pylist([{"prompt": CHAT, "answer": n} for n in range(4)])
    pyarrow.parquet.write_table(table, tmp_path / "d.parquet")
    with pyarrow.ipc.new_stream(tmp_path / "data-00000-of-00001.arrow", table.schema) as stream:
        stream.write_table(table)
    for name, builder in (("d.parquet", "parquet"), ("data-00000-of-00001.arrow", "arrow")):
        assert rows.first_rows(tmp_path / name, builder, 2) == table.to_pylist()[:2]
