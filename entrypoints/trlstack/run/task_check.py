"""A task checked in seconds, before anything heavy starts (`trlstack check-task`, and `train` before it waits
for the server; `trlstack slurm` before it submits): its config against the recipe's keys, its reward
functions imported and called as the trainer will, the first rows of its data for the columns the trainer and
the rewards take, and a local model folder for what loading it needs. Nothing here imports torch, TRL or
`datasets`; the reward modules import what they import.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trlstack.errors import UsageError
from trlstack.recipes import Recipe
from trlstack.reward_calls import shown_path
from trlstack.run import passthrough, reward_check, rows, task, trl_config
from trlstack.run.reward_check import Problem, Reward

ROWS = 2  # rows each reward is called on, with every stand-in completion
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json")


@dataclass
class Report:
    """What a check found: the problems (none: the task runs), and what it checked or could not, said."""

    problems: list[Problem] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def text(self, name: str) -> str:
        if not self.problems:
            return f"{name}: passed in {self.seconds:.2f} s: " + "; ".join(self.checked)
        lines = [f"{name}: {len(self.problems)} problem(s), nothing was started:"]
        return "\n".join([*lines, *(f"  - {problem}" for problem in self.problems)])


def check_task(
    config: Mapping[str, Any], recipe: Recipe, source: Path, root: Path, row_count: int = ROWS
) -> Report:
    """Check the run `config` (read from `source`, its paths relative to `root`) describes for `recipe`."""
    started = time.monotonic()
    report = Report()
    where = shown_path(source.resolve(), root)
    unknown = trl_config.unknown_keys(config, passthrough.accepted_keys(recipe.name))
    if unknown:
        fix = f"use field names of {recipe.describe_dataclasses()} (trl 1.16), or remove them"
        report.problems.append(
            Problem(where, f"keys the {recipe.name} script does not accept: {', '.join(unknown)}", fix)
        )
    for missing in trl_config.missing_keys(config, recipe):
        report.problems.append(Problem(where, f"no {missing}", "add it to the config"))
    data = _data(config, recipe, where, root, row_count, report)
    with reward_check.importing_from(root):
        rewards = _rewards(config, where, root, report)
        _use_rewards(rewards, data, recipe, config, root, report)
    _models(config, where, root, report)
    report.seconds = time.monotonic() - started
    return report


def _rewards(config: Mapping[str, Any], where: str, root: Path, report: Report) -> list[Reward]:
    names = config.get("reward_funcs") or []
    if isinstance(names, str):
        names = [names]
    found = []
    for name in names:
        if name in reward_check.BUILT_IN:
            found.append(Reward(name, _built_in_stand_in(name)))
            continue
        loaded = reward_check.load(str(name), root, f"{where}: reward_funcs")
        if isinstance(loaded, Problem):
            report.problems.append(loaded)
        else:
            found.append(loaded)
    return found


def _built_in_stand_in(name: str) -> Any:
    """TRL's own reward by its signature only: the check holds the data to the columns it takes, and does not
    import TRL (torch) to call it."""
    columns = reward_check.BUILT_IN[name]

    def built_in(**kwargs: Any) -> list[float]:
        return [0.0] * len(kwargs["completions"])

    built_in.__signature__ = _signature(columns)  # type: ignore[attr-defined]
    built_in.__name__ = name
    return built_in


def _signature(columns: Sequence[str]) -> Any:
    import inspect

    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter(column, keyword) for column in columns]
    parameters.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(parameters)


@dataclass(frozen=True)
class Data:
    rows: list[dict[str, Any]] | None  # None: not read here (on the Hub, or no reader)
    columns: set[str] | None
    shown: str = ""  # the file they are from, as the user names it


def _data(
    config: Mapping[str, Any], recipe: Recipe, where: str, root: Path, count: int, report: Report
) -> Data:
    """The first rows of each dataset the config names, checked for the columns the trainer reads."""
    first: Data | None = None
    for source in task.sources(config, root):
        data = _read(source, recipe, where, root, count, report)
        first = first or data
    return first or Data(None, None)


def _read(source: task.Source, recipe: Recipe, where: str, root: Path, count: int, report: Report) -> Data:
    key = f"{where}: {source.key}"
    if source.kind == "hub":
        report.checked.append(
            f"data {source.named} is not local: its rows are checked when the trainer loads it"
        )
        return Data(None, None)
    if source.kind == "missing":
        fix = f"put it in the task folder {root} or fix the path (relative to the task folder)"
        report.problems.append(Problem(key, f"the data {source.named} does not exist", fix))
        return Data(None, None)
    if source.kind == "unknown" or not source.builder or not source.files:
        what = f"data {source.named} holds no data file trlstack reads"
        fix = "give JSON Lines (.jsonl), JSON, Parquet or CSV files, or a folder a Dataset was saved to"
        report.problems.append(Problem(key, what, fix))
        return Data(None, None)
    path = source.files[0]
    shown = shown_path(path, root)
    try:
        found = rows.first_rows(path, source.builder, count)
    except rows.NotHere as error:
        report.checked.append(f"data {shown} not read: {error}")
        return Data(None, None)
    except rows.Unreadable as error:
        report.problems.append(Problem(shown, f"{error}", f"fix the file, or give a .{source.builder} file"))
        return Data(None, None)
    if not found:
        report.problems.append(Problem(shown, "holds no rows", "give it at least one row per batch"))
        return Data(None, None)
    columns = {column for row in found for column in row}
    _columns(found, columns, recipe, shown, report)
    report.checked.append(f"data {shown} (columns {', '.join(sorted(columns))})")
    return Data(found, columns, shown)


def _columns(
    found: list[dict[str, Any]], columns: set[str], recipe: Recipe, shown: str, report: Report
) -> None:
    have = ", ".join(sorted(columns)) or "none"
    for column in recipe.columns:
        if column not in columns:
            what = f"no column {column}, which the {recipe.name} trainer reads (its columns: {have})"
            fix = f"name the column of prompts `{column}`: a text, or a list of chat messages"
            report.problems.append(Problem(shown, what, fix))
    for number, row in enumerate(found, 1):
        prompt = row.get("prompt")
        chat = isinstance(prompt, list) and all(isinstance(m, Mapping) and "content" in m for m in prompt)
        if "prompt" in row and not (isinstance(prompt, str) or (chat and prompt)):
            what = f"row {number}: prompt is {type(prompt).__name__}"
            fix = 'give a text, or chat messages ([{"role": "user", "content": ...}])'
            report.problems.append(Problem(shown, what, fix))


def _use_rewards(
    rewards: list[Reward], data: Data, recipe: Recipe, config: Mapping[str, Any], root: Path, report: Report
) -> None:
    """Each reward held to what the trainer passes, then called on the rows read (where there are some)."""
    callable_ = []
    for reward in rewards:
        problems = reward_check.signature_problems(reward, recipe, data.columns, root)
        report.problems += problems
        if not problems and reward.name not in reward_check.BUILT_IN:
            callable_.append(reward)
    if not rewards:
        return
    if data.rows is None or not data.rows:
        report.checked.append(
            f"rewards {', '.join(r.name for r in rewards)} imported, not called (no rows here)"
        )
        return
    kwargs = reward_check.call_kwargs(data.rows, recipe, int(config.get("max_steps") or 0))
    for reward in callable_:
        problem = reward_check.call_problem(reward, kwargs, root, data.shown)
        if problem is not None:
            report.problems.append(problem)
    calls = f"{len(data.rows)} rows x {len(reward_check.COMPLETIONS)} completions"
    report.checked.append(
        f"rewards {', '.join(r.name for r in rewards)} ({len(callable_)} called on {calls})"
    )


def _models(config: Mapping[str, Any], where: str, root: Path, report: Report) -> None:
    """A local model folder (model, reward model) holds what loading it needs."""
    for key in task.FOLDER_KEYS:
        named = config.get(key)
        if not isinstance(named, str) or not named:
            continue
        path = Path(named).expanduser()
        path = path if path.is_absolute() else root / path
        if not path.exists():
            if named.startswith(("/", "./", "../", "~")):
                fix = "fix the path (relative to the task folder), or name a model on the Hub"
                report.problems.append(
                    Problem(f"{where}: {key}", f"model folder {named} does not exist", fix)
                )
            else:
                report.checked.append(f"{key} {named} is not local: loaded when the run starts")
            continue
        report.problems += _model_folder(path, key, shown_path(path.resolve(), root))
        report.checked.append(f"{key} {named} (config, tokenizer, weights)")


def _model_folder(path: Path, key: str, shown: str) -> list[Problem]:
    if not path.is_dir():
        return [Problem(shown, f"{key} names a file", "name the model's folder (save_pretrained's)")]
    found = []
    if not (path / "config.json").is_file():
        found.append(Problem(shown, "no config.json", "save the model with model.save_pretrained(FOLDER)"))
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        what = f"no tokenizer ({' or '.join(TOKENIZER_FILES)})"
        found.append(Problem(shown, what, "save it beside the model: tokenizer.save_pretrained(FOLDER)"))
    if not any(any(path.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        what = "no weights (*.safetensors or pytorch_model*.bin)"
        found.append(Problem(shown, what, "save the model with model.save_pretrained(FOLDER)"))
    return found


def require_task(config: Mapping[str, Any], recipe: Recipe, source: Path, root: Path, name: str) -> Report:
    """check_task, then UsageError listing every problem (each with its fix) where there is one."""
    report = check_task(config, recipe, source, root)
    if report.problems:
        raise UsageError(report.text(name))
    return report
