"""What the task check's tests share: the scaffold `trlstack init` writes, checked as check-task checks it,
and the edits that break it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from trlstack.commands import init
from trlstack.recipes import RECIPES
from trlstack.run import task_check, trl_config


def scaffold(root: Path, recipe: str = "grpo") -> Path:
    root.mkdir(parents=True)
    for name, text in init.contents(recipe, root).items():
        (root / name).write_text(text)
    return root


def check(root: Path, recipe: str = "grpo") -> task_check.Report:
    config = trl_config.load_config(root / "config.yaml")
    return task_check.check_task(config, RECIPES[recipe], root / "config.yaml", root)


def problems(root: Path, recipe: str = "grpo") -> list[str]:
    return [str(problem) for problem in check(root, recipe).problems]


def edit_config(root: Path, old: str, new: str) -> None:
    path = root / "config.yaml"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))


def add_reward(root: Path, source: str, name: str) -> None:
    """Append a function to rewards.py and name it in the config's reward_funcs."""
    with (root / "rewards.py").open("a") as module:
        module.write("\n\n" + textwrap.dedent(source))
    edit_config(root, "  - rewards.brevity\n", f"  - rewards.brevity\n  - rewards.{name}\n")


def line_of(root: Path, text: str) -> int:
    lines = (root / "rewards.py").read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)
