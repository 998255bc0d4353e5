"""Fixtures of the compose tests: GPU plans as .env files and compose projects removed after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from stacks import COMPOSE_FILE, Compose
from trlstack.cli import main as trlstack_main


@pytest.fixture(scope="session")
def plan_env(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Path]:
    """plan_env(N): the .env `trlstack plan --gpus N --format env -o FILE` writes for an N-GPU machine."""
    folder = tmp_path_factory.mktemp("plans")

    def write(gpus: int) -> Path:
        path = folder / f"{gpus}-gpus.env"
        if not path.exists():
            assert trlstack_main(["plan", "--gpus", str(gpus), "--format", "env", "-o", str(path)]) == 0
        return path

    return write


@pytest.fixture
def project(plan_env: Callable[[int], Path]) -> Iterator[Callable[..., Compose]]:
    """project(gpus=2, files=..., **settings): a Compose handle on a fresh project, removed after the test."""
    made: list[Compose] = []

    def make(gpus: int = 2, files: Sequence[Path] = (COMPOSE_FILE,), **settings: str) -> Compose:
        made.append(Compose(env_file=plan_env(gpus), files=files, settings=settings))
        return made[-1]

    yield make
    for compose in made:
        compose.down()
