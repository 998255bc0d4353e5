"""trlstack.metrics reads a run's recorded metrics from its output folder alone: trackio's database and its
not yet imported fragments, each log call once, in the trainer's step order, its special values as floats."""

from __future__ import annotations

import math
import sqlite3

import pytest
import tracked
from trlstack import metrics


def test_a_run_folder_and_a_folder_of_runs_are_both_found(tmp_path):
    tracked.database(tmp_path / "grpo")
    tracked.database(tmp_path / "rloo", project="rloo")
    (tmp_path / "not-a-run").mkdir()
    (run,) = metrics.find_stores(tmp_path / "grpo")
    assert (run.name, run.database.name) == ("grpo", "grpo.db")
    assert [store.name for store in metrics.find_stores(tmp_path)] == ["grpo", "rloo"]


def test_rows_come_in_step_order_with_their_config(tmp_path):
    path = tracked.database(tmp_path)
    tracked.config(path, "grpo", {"model_name_or_path": "tiny", "max_steps": 4})
    for step in (2, 1):
        tracked.log(path, "grpo", step, tracked.train_row(step, loss=0.5 / step, reward=step / 10))
    (run,) = metrics.read_runs(metrics.find_stores(tmp_path)[0])
    assert run.name == "grpo" and run.config["max_steps"] == 4
    assert run.series("loss") == [(1.0, 0.5), (2.0, 0.25)]
    assert run.series("train/reward") == run.series("reward") == [(1.0, 0.1), (2.0, 0.2)]
    assert {"loss", "reward", "global_step"} <= run.names()


def test_fragments_not_yet_imported_count_once(tmp_path):
    path = tracked.database(tmp_path)
    imported = tracked.log(path, "grpo", 1, tracked.train_row(1, loss=1.0))
    tracked.fragment(tmp_path, "grpo", 1, tracked.train_row(1, loss=1.0), log_id=imported)  # already in
    tracked.fragment(tmp_path, "grpo", 2, tracked.train_row(2, loss=0.5))
    (run,) = metrics.read_runs(metrics.find_stores(tmp_path)[0])
    assert run.series("loss") == [(1.0, 1.0), (2.0, 0.5)]


def test_a_run_on_a_network_filesystem_may_have_fragments_only(tmp_path):
    tracked.fragment(tmp_path, "grpo", 3, tracked.train_row(3, loss=0.1))
    (inbox,) = tmp_path.joinpath("trackio", "inbox").iterdir()
    inbox.joinpath("00000001.jsonl").write_text('{"kind": "metric", "run": "grpo", "st')  # cut short
    (store,) = metrics.find_stores(tmp_path)
    assert store.database is None
    (run,) = metrics.read_runs(store)
    assert run.series("loss") == [(3.0, 0.1)]


def test_nan_and_infinity_are_left_out_of_a_series(tmp_path):
    path = tracked.database(tmp_path)
    for step, loss in enumerate(["NaN", "Infinity", 0.5], start=1):
        tracked.log(path, "grpo", step, tracked.train_row(step, loss=loss))
    (run,) = metrics.read_runs(metrics.find_stores(tmp_path)[0])
    assert math.isnan(run.rows[0]["train/loss"])
    assert run.series("loss") == [(3.0, 0.5)]


def test_a_database_that_is_not_trackios_raises_sqlites_error(tmp_path):
    folder = tmp_path / "trackio"
    folder.mkdir()
    (folder / "grpo.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.Error):
        metrics.read_runs(metrics.find_stores(tmp_path)[0])


def test_reading_writes_nothing(tmp_path):
    path = tracked.database(tmp_path)
    tracked.log(path, "grpo", 1, tracked.train_row(1, loss=1.0))
    before = {file.name: file.stat().st_mtime_ns for file in path.parent.iterdir()}
    metrics.read_runs(metrics.find_stores(tmp_path)[0])
    assert {file.name: file.stat().st_mtime_ns for file in path.parent.iterdir()} == before
