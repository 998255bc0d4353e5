"""`trlstack init DIR --recipe R`: a task folder that trains as it is, to start one's own from.

    DIR/config.yaml   the recipe's run in TRL's format, naming the rewards by import path and the data by path
    DIR/rewards.py    two small documented reward functions in TRL's signature
    DIR/data.jsonl    64 arithmetic prompts with the answer the first reward checks
    DIR/README.md     what each file is, and the commands that check and train it

The files are package data (templates/), the config the recipe's own. A folder that holds anything is left
as it is: nothing a user made is written over.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from trlstack.errors import UsageError
from trlstack.files import write_atomically
from trlstack.options import add_settings, flag, settings_from
from trlstack.recipes import RECIPES
from trlstack.run.task import CONFIG_NAME

TEMPLATES = "trlstack.commands.init.templates"
# What each file of the task is made from: the config is the recipe's own template.
FILES = {"rewards.py": "rewards.py", "data.jsonl": "data.jsonl", "README.md": "README.md"}


@dataclass(frozen=True)
class InitSettings:
    """The folder to make and the recipe its config is for. `trlstack init`'s own flags: no variables."""

    dir: str = flag("folder to make (new, or empty)", positional=True, metavar="DIR")
    recipe: str = flag("the recipe the config is for", "grpo", choices=list(RECIPES))


DESCRIPTION = (
    "Write a task folder that trains as it is: a config in TRL's format naming its rewards by import path, "
    "a module of two reward functions, a small data file and a README. Check it with `trlstack check-task "
    "DIR`, train it with TRLSTACK_TASK=DIR (compose), `train RECIPE --task DIR` or `trlstack slurm RECIPE "
    "--task DIR`."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    add_settings(parser, InitSettings, os.environ)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(InitSettings, args)
    folder = Path(settings.dir).expanduser().resolve()
    check_target(folder)
    for name, text in contents(settings.recipe, folder).items():
        write_atomically(folder / name, text)
    print(f"trlstack init: wrote a {settings.recipe} task in {folder}: {', '.join(contents_names())}")
    print(f"  check it:  trlstack check-task {folder} --recipe {settings.recipe}")
    print(f"  train it:  TRLSTACK_TASK={folder} docker compose up {settings.recipe}   (or train --task)")
    return 0


def check_target(folder: Path) -> None:
    """Refuse a folder that exists as a file or holds anything; make a new one."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is a file; name a new folder for the task.")
    if folder.is_dir() and any(folder.iterdir()):
        raise UsageError(
            f"{folder} is not empty; name a new or empty folder for the task (nothing in it was touched)."
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot make {folder} ({error.strerror}); name a folder you can write.") from None


def contents_names() -> list[str]:
    return [CONFIG_NAME, *FILES]


def contents(recipe: str, folder: Path) -> dict[str, str]:
    """The task's files: name -> text, the README's commands naming `folder` and `recipe`."""
    templates = resources.files(TEMPLATES)
    found = {CONFIG_NAME: templates.joinpath(f"{recipe}.yaml").read_text(encoding="utf-8")}
    for name, template in FILES.items():
        found[name] = templates.joinpath(template).read_text(encoding="utf-8")
    found["README.md"] = found["README.md"].format(recipe=recipe, folder=folder)
    return found
