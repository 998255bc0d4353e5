"""A role's command as plain data, and the one place that replaces the process with it.

Roles build a Command with pure functions (tests assert on it), then `exec_command` hands the process over:
signals and the exit code of vLLM or accelerate pass straight through to the caller.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field

from trlstack.errors import UsageError
from trlstack.stack import GET_GPU_STACK


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
    """UsageError, before anything starts, when the command's program is not installed, or, for
    `PYTHON -m MODULE`, when MODULE's package cannot be found (found, not imported: no torch here)."""
    program = command.argv[0]
    if shutil.which(program) is None:
        raise UsageError(f"`{program}` is not on PATH: {GET_GPU_STACK}.")
    if command.argv[1:2] == ["-m"]:
        package = command.argv[2].partition(".")[0]
        if importlib.util.find_spec(package) is None:
            raise UsageError(f"`{package}` is not installed for {program}: {GET_GPU_STACK}.")


def exec_command(command: Command, environ: Mapping[str, str] | None = None) -> None:
    """Replace this process with `command`."""
    require_program(command)
    environ = os.environ if environ is None else environ
    os.execvpe(command.argv[0], command.argv, {**environ, **command.env})
