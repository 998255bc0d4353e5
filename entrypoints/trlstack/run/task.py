"""A user's task in one folder, and what a run takes from it:

    DIR/config.yaml   the run's config in TRL's format, the recipe's keys (read unless --config names another)
    DIR/*.py          reward functions, named in `reward_funcs` by import path (`rewards.correct_answer`);
                      DIR goes first on every training process's PYTHONPATH
    DIR/...           data: JSON Lines, JSON, Parquet or CSV files, or a folder a `datasets` Dataset was saved
                      to (`save_to_disk`), named by `dataset_name` or by `datasets:` entries' `data_files`
    DIR/model/        optionally a model folder (config.json, tokenizer, weights), named by model_name_or_path

A data or model path in the config is relative to DIR (to the working folder where there is no task; the
output folder stays relative to where train runs, as compose and Slurm set it). The training
processes get it absolute, and what TRL's scripts cannot load by name (one data file, a saved `datasets`
folder) becomes a `datasets:` entry of the builder that reads it (`load_dataset(FILE)` takes only Hub names
and folders of data files; `load_dataset(SAVED)` refuses a `save_to_disk` folder). Only the folder is read.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.recipes import Recipe
from trlstack.run.settings import TrainSettings

CONFIG_NAME = "config.yaml"
# Where compose mounts TRLSTACK_TASK, read-only, in the trainer and the server alike.
MOUNT = "/task"
# Data files by suffix, and the `datasets` builder that reads each (the same `load_dataset(FOLDER)` infers).
BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}
# Keys that may name a folder of weights: made absolute where they name one relative to the task.
FOLDER_KEYS = ("model_name_or_path", "reward_model_name_or_path", "reward_model_path")
# A folder `Dataset.save_to_disk` wrote holds one of these (`DatasetDict.save_to_disk`: the first).
SAVED_MARKERS = ("dataset_dict.json", "state.json")
REMOTE = ("hf://", "http://", "https://", "s3://", "gs://")


def task_folder(raw: str, given_as: str = f"--task ({Env.TASK})") -> Path:
    """The task folder `raw` names, absolute; UsageError naming the fix where it is not one (`given_as`: how
    the command was given it)."""
    path = Path(raw).expanduser()
    if not path.is_dir():
        what = "is not a folder" if path.exists() else "does not exist"
        raise UsageError(
            f"task folder {raw} {what}; {given_as} must name a folder holding {CONFIG_NAME}; make one "
            f"with `trlstack init {raw}`."
        )
    return path.resolve()


def config_path(settings: TrainSettings, recipe: Recipe) -> Path:
    """The config a run reads: --config, else the task's config.yaml, else the recipe's bundled one."""
    if settings.config:
        return Path(settings.config)
    if settings.task:
        path = task_folder(settings.task) / CONFIG_NAME
        if not path.is_file():
            raise UsageError(
                f"task folder {settings.task} has no {CONFIG_NAME}; write the run's config there in TRL's "
                f"format (`trlstack init NEW_FOLDER --recipe {recipe.name}` writes one to start from), or "
                "pass --config."
            )
        return path
    return recipe.bundled_config


def base_folder(settings: TrainSettings, cwd: Path) -> Path:
    """What relative paths in the run's config are relative to: the task folder, else the working folder."""
    return task_folder(settings.task) if settings.task else cwd


@dataclass(frozen=True)
class Source:
    """One dataset a config names, as found from the base folder.

    kind: "hub" (not on this machine: left to `load_dataset`), "missing" (written as a path, absent),
    "unknown" (a file of a kind no builder reads), "files" (data files a builder reads: `builder`, `files`),
    "saved" (a `save_to_disk` folder: its arrow files), "folder" (a folder of data files)."""

    key: str  # where the config names it: dataset_name, datasets[0]
    named: str  # as the config writes it
    kind: str
    builder: str | None = None
    files: tuple[Path, ...] = ()  # the train split's data files, absolute
    entry: Mapping[str, Any] | None = None  # its `datasets:` entry for TRL, paths absolute

    @property
    def local(self) -> bool:
        return self.kind in ("files", "saved", "folder")


def _local(named: str, base: Path) -> Path | None:
    """The local path `named` means (absolute, or relative to `base`), where something is there."""
    if not named or named.startswith(REMOTE):
        return None
    path = Path(named).expanduser()
    path = path if path.is_absolute() else base / path
    return path if path.exists() else None


def _looks_local(named: str) -> bool:
    """Written as a path (a data file's suffix, or ./ ../ /), so its absence is a mistake, not a Hub name."""
    return named.startswith(("/", "./", "../", "~")) or Path(named).suffix.lower() in BUILDERS


def _data_files(folder: Path) -> list[Path]:
    """A folder's data files for the train split, as `load_dataset(FOLDER)` picks them: files named for it
    where there are some, else every data file (in sorted order)."""
    found = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in BUILDERS)
    found = [p for p in found if not any(part.startswith(".") for part in p.relative_to(folder).parts)]
    named = [p for p in found if "train" in p.relative_to(folder).as_posix().lower()]
    return named or found


def _saved_split(folder: Path, split: str) -> Path:
    """Where a saved Dataset's arrow files are: the folder itself, or its split's sub-folder (DatasetDict)."""
    return folder / split if (folder / SAVED_MARKERS[0]).is_file() else folder


def _path_source(key: str, named: str, path: Path, split: str) -> Source:
    """A dataset named by a local path: a data file, a saved `datasets` folder, or a folder of data files,
    with the `datasets:` entry that loads its train split."""
    if path.is_file():
        builder = BUILDERS.get(path.suffix.lower())
        if builder is None:
            return Source(key, named, "unknown", files=(path,))
        entry = {"path": builder, "data_files": {"train": str(path)}, "split": "train"}
        return Source(key, named, "files", builder, (path,), entry)
    if any((path / marker).is_file() for marker in SAVED_MARKERS):
        where = _saved_split(path, split)
        entry = {"path": "arrow", "data_files": {"train": str(where / "data-*.arrow")}, "split": "train"}
        return Source(key, named, "saved", "arrow", tuple(sorted(where.glob("data-*.arrow"))), entry)
    files = _data_files(path)
    builder = BUILDERS[files[0].suffix.lower()] if files else None
    return Source(key, named, "folder", builder, tuple(files), {"path": str(path.resolve())})


def _absolute_files(value: Any, base: Path) -> Any:
    """`data_files` (a path, a list, or split -> path or list) with relative paths made absolute."""
    if isinstance(value, Mapping):
        return {split: _absolute_files(files, base) for split, files in value.items()}
    if isinstance(value, list):
        return [_absolute_files(files, base) for files in value]
    if isinstance(value, str) and not value.startswith(REMOTE) and not Path(value).is_absolute():
        return str(base / value)
    return value


def _first_files(value: Any) -> list[str]:
    """The patterns of the train split in `data_files` (the first split named, where none is "train")."""
    if isinstance(value, Mapping):
        return _first_files(value.get("train", next(iter(value.values()), None)))
    if isinstance(value, list):
        return [str(item) for item in value]
    return [value] if isinstance(value, str) else []


def _entry_source(index: int, entry: Mapping[str, Any], base: Path, split: str) -> Source:
    """One `datasets:` entry: a builder and its data files, a local path, or a Hub dataset."""
    key, named = f"datasets[{index}]", str(entry.get("path", ""))
    path = _local(named, base)
    if path is not None:
        found = _path_source(key, named, path, str(entry.get("split") or split))
        rest = {k: v for k, v in entry.items() if k not in ("path", "data_files", "data_dir")}
        return Source(key, named, found.kind, found.builder, found.files, {**rest, **(found.entry or {})})
    if entry.get("data_files") is None and entry.get("data_dir") is None:
        return Source(key, named, "missing" if _looks_local(named) else "hub", entry=None)
    fixed = dict(copy.deepcopy(entry))
    if entry.get("data_files") is not None:
        fixed["data_files"] = _absolute_files(entry["data_files"], base)
    if isinstance(entry.get("data_dir"), str):
        fixed["data_dir"] = _absolute_files(entry["data_dir"], base)
    patterns = _first_files(fixed.get("data_files")) or [f"{fixed['data_dir']}/*"]
    files = sorted({match for pattern in patterns for match in _glob(pattern)})
    builder = named if named in BUILDERS.values() else None
    kind = "files" if files else "missing"
    return Source(
        key, ", ".join(_first_files(entry.get("data_files"))) or named, kind, builder, tuple(files), fixed
    )


def _glob(pattern: str) -> list[Path]:
    path = Path(pattern)
    if not any(char in pattern for char in "*?["):
        return [path] if path.is_file() else []
    anchor = Path(path.anchor)
    return [match for match in anchor.glob(str(path.relative_to(anchor))) if match.is_file()]


def sources(config: Mapping[str, Any], base: Path) -> list[Source]:
    """The datasets `config` names, as TRL's scripts choose: its `datasets:` entries where there are some,
    else `dataset_name`."""
    split = str(config.get("dataset_train_split") or "train")
    entries = config.get("datasets") or []
    if entries:
        return [
            _entry_source(index, entry, base, split)
            if isinstance(entry, Mapping)
            else Source(f"datasets[{index}]", str(entry), "unknown")
            for index, entry in enumerate(entries)
        ]
    named = str(config.get("dataset_name") or "")
    if not named:
        return []
    path = _local(named, base)
    if path is None:
        return [Source("dataset_name", named, "missing" if _looks_local(named) else "hub")]
    return [_path_source("dataset_name", named, path, split)]


def local_folders(config: Mapping[str, Any], base: Path) -> dict[str, str]:
    """The model keys of `config` that name a folder relative to `base`, made absolute."""
    found = {}
    for key in FOLDER_KEYS:
        value = config.get(key)
        if isinstance(value, str) and not Path(value).expanduser().is_absolute():
            path = _local(value, base)
            if path is not None and path.is_dir():
                found[key] = str(path.resolve())
    return found


def data_keys(config: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """The data keys of `config` as the training processes must read them: local paths absolute, a data file
    or a saved `datasets` folder as the `datasets:` entry of the builder that reads it."""
    found = sources(config, base)
    if config.get("datasets"):
        entries = [
            dict(source.entry) if source.entry is not None else entry
            for source, entry in zip(found, config["datasets"], strict=True)
        ]
        return {"datasets": entries} if entries != list(config["datasets"]) else {}
    if not found or not found[0].local:
        return {}
    (source,) = found
    entry = dict(source.entry or {})
    if source.kind == "folder":
        return {"dataset_name": entry["path"]}
    split = {"dataset_train_split": "train"} if config.get("dataset_train_split", "train") != "train" else {}
    return {"dataset_name": None, "datasets": [entry], **split}


def python_path(base: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """PYTHONPATH with `base` first, so that every training process imports the task's reward modules."""
    rest = [part for part in environ.get("PYTHONPATH", "").split(":") if part and part != str(base)]
    return {"PYTHONPATH": ":".join([str(base), *rest])}


def task_launch(
    settings: TrainSettings, config: Mapping[str, Any], environ: Mapping[str, str], cwd: Path
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """What a run takes from its task folder (or, without one, from paths relative to the working folder):
    the config keys to set over `config` (the run's config, train's overrides applied), the variables of the
    training processes, and the lines to log. Pure but for looking at the folder."""
    base = base_folder(settings, cwd)
    keys: dict[str, Any] = {**local_folders(config, base), **data_keys(config, base)}
    if not settings.task:
        return keys, {}, []
    notes = [f"task {base}: rewards imported from it (first on PYTHONPATH), its paths made absolute"]
    notes += [f"{key}: {value}" for key, value in keys.items() if key in FOLDER_KEYS]
    for source in sources(config, base):
        if source.local:
            notes.append(
                f"data {source.named} ({source.builder or source.kind}, {len(source.files)} file(s))"
            )
    return keys, python_path(base, environ), notes


def task_model(task: str) -> str | None:
    """The model a task's config names (a folder in the task made absolute), for the server to serve the
    trainer's model; None where its config names none. UsageError for a task or config that cannot be read."""
    from trlstack.run.trl_config import load_config

    folder = task_folder(task)
    config = load_config(folder / CONFIG_NAME)
    model = config.get("model_name_or_path")
    if not isinstance(model, str) or not model:
        return None
    return local_folders(config, folder).get("model_name_or_path", model)
