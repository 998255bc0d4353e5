"""run/task.py: which config a run reads, and what the training processes get from a task folder (paths
absolute, one data file or a saved `datasets` folder as the `datasets:` entry that loads it, the folder first
on PYTHONPATH)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trlstack.errors import UsageError
from trlstack.recipes import RECIPES
from trlstack.run import task
from trlstack.run.settings import TrainSettings

GRPO = RECIPES["grpo"]


def settings(folder: Path | None = None, **more) -> TrainSettings:
    return TrainSettings(recipe="grpo", task=str(folder) if folder else None, **more)


def a_task(root: Path, config: str = "model_name_or_path: m\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / task.CONFIG_NAME).write_text(config)
    return root


def test_the_config_is_the_flag_s_else_the_task_s_else_the_recipe_s(tmp_path):
    folder = a_task(tmp_path / "t")
    assert task.config_path(settings(), GRPO) == GRPO.bundled_config
    assert task.config_path(settings(folder), GRPO) == folder / "config.yaml"
    assert task.config_path(settings(folder, config="/x/mine.yaml"), GRPO) == Path("/x/mine.yaml")


@pytest.mark.parametrize("make", ["missing", "file", "no config"])
def test_a_task_that_is_no_folder_or_lacks_its_config_is_refused_naming_the_fix(tmp_path, make):
    path = tmp_path / "t"
    if make == "file":
        path.write_text("")
    elif make == "no config":
        path.mkdir()
    with pytest.raises(UsageError) as error:
        task.config_path(settings(path), GRPO)
    text = str(error.value)
    assert str(path) in text
    assert ("trlstack init" in text) and ("config.yaml" in text)


def data_keys(root: Path, **config):
    return task.data_keys(config, root)


def test_one_data_file_becomes_the_datasets_entry_of_its_builder(tmp_path):
    for name, builder in [
        ("d.jsonl", "json"),
        ("d.json", "json"),
        ("d.csv", "csv"),
        ("d.parquet", "parquet"),
    ]:
        (tmp_path / name).write_text("")
        keys = data_keys(tmp_path, dataset_name=name)
        entry = {"path": builder, "data_files": {"train": str(tmp_path / name)}, "split": "train"}
        assert keys == {"dataset_name": None, "datasets": [entry]}


def test_a_data_file_named_for_another_split_is_trained_on_as_train(tmp_path):
    (tmp_path / "d.jsonl").write_text("")
    keys = data_keys(tmp_path, dataset_name="d.jsonl", dataset_train_split="mine")
    assert keys["dataset_train_split"] == "train"  # get_dataset names the mixture's split "train"


def test_a_saved_datasets_folder_becomes_its_arrow_files_of_the_train_split(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "state.json").write_text("{}")
    (saved / "data-00000-of-00001.arrow").write_text("")
    entry = {"path": "arrow", "data_files": {"train": f"{saved}/data-*.arrow"}, "split": "train"}
    assert data_keys(tmp_path, dataset_name="saved")["datasets"] == [entry]

    split = tmp_path / "dict" / "mine"  # DatasetDict.save_to_disk: a folder per split
    split.mkdir(parents=True)
    (tmp_path / "dict" / "dataset_dict.json").write_text(json.dumps({"splits": ["mine"]}))
    (split / "data-00000-of-00001.arrow").write_text("")
    keys = data_keys(tmp_path, dataset_name="dict", dataset_train_split="mine")
    assert keys["datasets"][0]["data_files"] == {"train": f"{split}/data-*.arrow"}
    assert keys["dataset_train_split"] == "train"


def test_a_folder_of_data_files_is_named_absolute_and_a_hub_name_is_left_alone(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("")
    assert data_keys(tmp_path, dataset_name="data") == {"dataset_name": str(tmp_path / "data")}
    assert data_keys(tmp_path, dataset_name="trl-lib/DeepMath-103K") == {}
    assert data_keys(tmp_path, dataset_name=str(tmp_path / "data")) == {
        "dataset_name": str(tmp_path / "data")
    }


def test_datasets_entries_get_their_data_files_absolute_and_keep_their_other_keys(tmp_path):
    (tmp_path / "a.jsonl").write_text("")
    entries = [
        {"path": "json", "data_files": ["a.jsonl"], "columns": ["prompt"]},
        {"path": "trl-lib/tldr", "split": "train"},
        {"path": "a.jsonl", "fraction": 0.5},
    ]
    (first, hub, local) = data_keys(tmp_path, datasets=entries)["datasets"]
    assert first == {"path": "json", "data_files": [str(tmp_path / "a.jsonl")], "columns": ["prompt"]}
    assert hub == entries[1]
    assert local == {
        "path": "json",
        "data_files": {"train": str(tmp_path / "a.jsonl")},
        "split": "train",
        "fraction": 0.5,
    }


def test_sources_say_what_is_missing_unknown_or_on_the_hub(tmp_path):
    (tmp_path / "notes.txt").write_text("")
    kinds = {
        named: task.sources({"dataset_name": named}, tmp_path)[0].kind
        for named in ("gone.jsonl", "./gone", "org/name", "notes.txt")
    }
    assert kinds == {"gone.jsonl": "missing", "./gone": "missing", "org/name": "hub", "notes.txt": "unknown"}
    (entry,) = task.sources({"datasets": [{"path": "json", "data_files": "gone/*.jsonl"}]}, tmp_path)
    assert entry.kind == "missing" and entry.named == "gone/*.jsonl"


def test_a_folder_s_train_files_are_the_ones_named_for_it_else_all(tmp_path):
    for name in ("test.jsonl", "train-0.jsonl", "train-1.jsonl", ".hidden/train.jsonl"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    (source,) = task.sources({"dataset_name": str(tmp_path)}, tmp_path)
    assert [p.name for p in source.files] == ["train-0.jsonl", "train-1.jsonl"]


def test_task_launch_makes_the_task_s_paths_absolute_and_puts_it_first_on_pythonpath(tmp_path):
    folder = a_task(tmp_path / "t")
    (folder / "model").mkdir()
    (folder / "data.jsonl").write_text("")
    config = {"model_name_or_path": "model", "dataset_name": "data.jsonl", "reward_funcs": ["rewards.r"]}
    keys, env, notes = task.task_launch(settings(folder), config, {"PYTHONPATH": "/a:/b"}, tmp_path)
    assert keys["model_name_or_path"] == str(folder / "model")
    assert keys["datasets"] == [
        {"path": "json", "data_files": {"train": str(folder / "data.jsonl")}, "split": "train"}
    ]
    assert env == {"PYTHONPATH": f"{folder}:/a:/b"}
    assert notes[0].startswith(f"task {folder}: rewards imported from it")
    assert notes[1:] == [f"model_name_or_path: {folder / 'model'}", "data data.jsonl (json, 1 file(s))"]


def test_without_a_task_paths_are_the_working_folder_s_and_nothing_else_changes(tmp_path):
    (tmp_path / "d.jsonl").write_text("")
    config = {"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct", "dataset_name": "d.jsonl"}
    keys, env, notes = task.task_launch(settings(), config, {}, tmp_path)
    assert keys["datasets"][0]["data_files"] == {"train": str(tmp_path / "d.jsonl")}
    assert "model_name_or_path" not in keys and env == {} and notes == []


def test_the_server_serves_the_task_s_model_folder_or_its_hub_model(tmp_path):
    folder = a_task(tmp_path / "t", "model_name_or_path: model\n")
    (folder / "model").mkdir()
    assert task.task_model(str(folder)) == str(folder / "model")
    (folder / "config.yaml").write_text("model_name_or_path: org/name\n")
    assert task.task_model(str(folder)) == "org/name"
    (folder / "config.yaml").write_text("learning_rate: 1.0\n")
    assert task.task_model(str(folder)) is None
