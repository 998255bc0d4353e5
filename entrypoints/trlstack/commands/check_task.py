"""`trlstack check-task DIR [--recipe R]`: a task folder checked in seconds, starting nothing: its config
against the recipe's keys, its reward functions imported and called on the first rows of its data as the
trainer will call them, the columns the trainer and the rewards take, and a local model folder. `train`
and `trlstack slurm` run the same check before they start anything (run/task_check.py)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from trlstack.options import add_settings, flag, settings_from
from trlstack.recipes import RECIPES, resolve_recipe
from trlstack.run import task, trl_config
from trlstack.run.settings import TrainSettings
from trlstack.run.task_check import require_task


@dataclass(frozen=True)
class CheckTaskSettings:
    """The folder and the recipe to check it for: the command's own flags."""

    dir: str = flag("the task folder (its config.yaml, reward modules, data)", positional=True, metavar="DIR")
    recipe: str = flag("the recipe it is for", "grpo", choices=list(RECIPES))


DESCRIPTION = (
    "Check a task folder in seconds, starting nothing: its config.yaml against the recipe's keys, each "
    "reward function imported and called on the first rows of its data as the trainer calls it, the columns "
    "they and the trainer take, a local model folder. Exits 1 naming each problem's file (and line), "
    "function or column, and the fix."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    add_settings(parser, CheckTaskSettings, os.environ)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(CheckTaskSettings, args)
    recipe = resolve_recipe(settings.recipe)
    root = task.task_folder(settings.dir, "DIR")
    source = task.config_path(TrainSettings(recipe=recipe.name, task=str(root)), recipe)
    config = trl_config.load_config(source)
    report = require_task(config, recipe, source, root, f"task {root} ({recipe.name})")
    print(report.text(f"task {root} ({recipe.name})"))
    return 0
