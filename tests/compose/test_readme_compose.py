"""The README commands that drive compose, run with compose's own `--dry-run` (tests/readme_commands.py,
InCompose): the engine checks the project, its images and what would start, and nothing starts."""

from __future__ import annotations

import shlex

import pytest
from readme_commands import EXERCISED, InCompose, shown
from stacks import REPO

pytestmark = pytest.mark.docker

IN_COMPOSE = sorted({c.key: c for c in shown() if isinstance(EXERCISED.get(c.key), InCompose)}.items())


def dry(words: list[str], drop: tuple[str, ...]) -> list[list[str]]:
    """Each `docker compose ...` of a command line (`&&` between them) as compose arguments, `--dry-run`
    first."""
    commands: list[list[str]] = [[]]
    for word in words:
        if word == "&&":
            commands.append([])
        elif word not in drop:
            commands[-1].append(word)
    assert all(command[:2] == ["docker", "compose"] for command in commands), commands
    return [["--dry-run", *command[2:]] for command in commands]


@pytest.mark.parametrize(("key", "command"), IN_COMPOSE, ids=[key for key, _ in IN_COMPOSE])
def test_a_readme_compose_command_dry_runs(key, command, project, trlstack_image, tmp_path):
    how = EXERCISED[key]
    assert isinstance(how, InCompose)
    (tmp_path / "outputs").mkdir()
    compose = project(gpus=2, TRLSTACK_IMAGE=trlstack_image, TRLSTACK_OUTPUTS=str(tmp_path / "outputs"))
    for args in dry(shlex.split(command.text), how.drop):
        files = [
            arg
            for before, arg in zip(["", *args], args, strict=False)
            if before == "-f" and arg.endswith(".yaml")
        ]
        if files:  # the README's compose files, named from the repository root, instead of the project's
            compose.files = ()
            args = [str(REPO / arg) if arg in files else arg for arg in args]
        done = compose.run(*args, timeout=120, check=False)
        assert done.returncode == 0, f"{command}\n{shlex.join(compose.argv(*args))}: {done.stderr[-3000:]}"
