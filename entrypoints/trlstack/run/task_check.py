"""A task checked in seconds, before anything heavy starts (`trlstack check-task`, and `train` before it waits
for the server; `trlstack slurm` before it submits), as a pipeline of checks each of one whole thing (CHECKS):
its config against the recipe's keys, the first rows of its data for the columns the trainer reads, its
reward functions imported and called on those rows as the trainer will call them, and a local model folder
for what loading it needs. Nothing here imports torch, TRL or `datasets`; the reward modules import what they
import.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trlstack.errors import UsageError
from trlstack.recipes import Recipe
from trlstack.reward_calls import shown_path
from trlstack.run import passthrough, trl_config
from trlstack.run.model_check import check_models
from trlstack.run.reward_check import check_rewards
from trlstack.run.rows import check_data
from trlstack.run.task_report import ROWS, Problem, Report, Task


def check_config(found: Task, report: Report) -> None:
    """The config's keys: every one the recipe's script accepts, and none a run needs missing."""
    recipe = found.recipe
    unknown = trl_config.unknown_keys(found.config, passthrough.accepted_keys(recipe.name))
    if unknown:
        fix = f"use field names of {recipe.describe_dataclasses()} (trl 1.16), or remove them"
        what = f"keys the {recipe.name} script does not accept: {', '.join(unknown)}"
        report.problems.append(Problem(found.where, what, fix))
    for missing in trl_config.missing_keys(found.config, recipe):
        report.problems.append(Problem(found.where, f"no {missing}", "add it to the config"))


# The checks in order, each adding what it finds to the report: the data step keeps the rows it read, which
# the rewards step calls the rewards on.
CHECKS: tuple[Callable[[Task, Report], None], ...] = (check_config, check_data, check_rewards, check_models)


def check_task(
    config: Mapping[str, Any], recipe: Recipe, source: Path, root: Path, row_count: int = ROWS
) -> Report:
    """Check the run `config` (read from `source`, its paths relative to `root`) describes for `recipe`."""
    started = time.monotonic()
    found = Task(config, recipe, shown_path(source.resolve(), root), root, row_count)
    report = Report()
    for check in CHECKS:
        check(found, report)
    report.seconds = time.monotonic() - started
    return report


def require_task(
    config: Mapping[str, Any], recipe: Recipe, source: Path, root: Path, name: str, extra: Sequence[str] = ()
) -> Report:
    """check_task on the config as the recipe's script will see it (the values after `--`, `extra`, over
    the file's: `-- --reward_funcs my.reward` is the reward checked), then UsageError listing every problem
    (each with its fix) where there is one."""
    report = check_task(trl_config.with_passed(config, extra, recipe), recipe, source, root)
    if report.problems:
        raise UsageError(report.text(name))
    return report
