"""A role's command as plain data, and the one place that replaces the process with it.

Roles build a Command with pure functions (tests assert on it), then `exec_command` hands the process over:
signals and the exit code of vLLM or accelerate pass straight through to the caller.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field

from trlstack.errors import UsageError


@dataclass(frozen=True)
class Command:
    """argv to exec, and the variables it adds to the inherited environment."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """One line a shell runs the same way: `NAME=value ... program args`, every word quoted."""
        assignments = [f"{name}={shlex.quote(value)}" for name, value in sorted(self.env.items())]
        return " ".join([*assignments, *map(shlex.quote, self.argv)])


def require_program(command: Command) -> None:
    """UsageError, before anything starts, when the command's program is not installed."""
    program = command.argv[0]
    if shutil.which(program) is None:
        raise UsageError(
            f"`{program}` is not on PATH. Install the GPU stack (`pip install 'trlstack[gpu]'`) or run "
            "inside the trlstack image."
        )


def exec_command(command: Command, environ: Mapping[str, str] | None = None) -> None:
    """Replace this process with `command`."""
    require_program(command)
    environ = os.environ if environ is None else environ
    os.execvpe(command.argv[0], command.argv, {**environ, **command.env})
