"""What the task check's steps (run/task_check.py) share: the task as each reads it (`Task`), one `Problem`
that would fail the run, the first rows of its data (`Rows`), and the `Report` every step adds to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trlstack.recipes import Recipe

ROWS = 2  # rows each reward is called on, with every stand-in completion


@dataclass(frozen=True)
class Task:
    """A task as every check reads it: the run's config for `recipe`, where the config file is (as shown in
    problems), the folder its relative paths are relative to, and the rows each reward is called on."""

    config: Mapping[str, Any]
    recipe: Recipe
    where: str
    root: Path
    row_count: int = ROWS


@dataclass(frozen=True)
class Problem:
    """One thing that would fail the run: where (a file and line, or a config key), what, and the fix."""

    where: str
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}; {self.fix}."


@dataclass(frozen=True)
class Rows:
    """The first rows of the task's data, and their columns (None: not read here, on the Hub or no reader)."""

    rows: list[dict[str, Any]] | None
    columns: set[str] | None
    shown: str = ""  # the file they are from, as the user names it


@dataclass
class Report:
    """What a check found: the problems (none: the task runs), what it checked or could not, said, and the
    rows the data check read, which the rewards check calls the rewards on."""

    problems: list[Problem] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    rows: Rows = Rows(None, None)
    seconds: float = 0.0

    def text(self, name: str) -> str:
        if not self.problems:
            return f"{name}: passed in {self.seconds:.2f} s: " + "; ".join(self.checked)
        lines = [f"{name}: {len(self.problems)} problem(s), nothing was started:"]
        return "\n".join([*lines, *(f"  - {problem}" for problem in self.problems)])
