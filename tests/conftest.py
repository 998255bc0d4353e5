"""Session fixtures for the tests that need Docker: the engine and the trlstack image, built once per session.

Without an engine these tests skip and say why; with CI=true they fail instead, because CI provisions the
engine (scripts/docker-engine.sh). Settings (env):
  TRLSTACK_IMAGE              tag of the test build (default trlstack:test)
  TRLSTACK_BASE_IMAGE         base image, e.g. the local debootstrap image trlstack-base:trixie
  TRLSTACK_CA_BUNDLE          CA bundle for a TLS-intercepting proxy, passed as a BuildKit secret
  TRLSTACK_WITH_KERNEL_CACHE  the build's WITH_KERNEL_CACHE (default 0: tests never need the Hub; the bake
                              itself is tested against a stand-in Hub, tests/image/test_kernel_bake.py)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "docker" / "build.sh"
PROVISION_FIX = "run `bash scripts/docker-engine.sh` as root"


def missing_engine() -> str | None:
    """Why the Docker tests cannot run here, or None when the engine, buildx and compose all answer."""
    if shutil.which("docker") is None:
        return "no `docker` CLI on PATH"
    for argv, what in (
        (["docker", "info"], "no running Docker engine"),
        (["docker", "buildx", "version"], "no buildx plugin"),
        (["docker", "compose", "version"], "no compose plugin"),
    ):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            return f"{what} (`{' '.join(argv)}`: {detail[0]})"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `rebuild` run after every other: the engine keeps the no-cache rebuild's copy of the
    image's layers for the rest of the run (7 GB, tests/image/test_reproducible.py), so the .sif conversion,
    the run's peak on disk, comes before it."""
    items.sort(key=lambda item: item.get_closest_marker("rebuild") is not None)


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The docker CLI command, once the engine, buildx and compose answer."""
    reason = missing_engine()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI provisions the engine, so this is an error: {PROVISION_FIX}")
        pytest.skip(f"{reason}; {PROVISION_FIX}")
    return "docker"


def bake_env() -> dict[str, str]:
    """Bake variables for a test build with docker/build.sh, from the TRLSTACK_* settings."""
    env = dict(os.environ)
    env["WITH_KERNEL_CACHE"] = os.environ.get("TRLSTACK_WITH_KERNEL_CACHE", "0")
    if base := os.environ.get("TRLSTACK_BASE_IMAGE"):
        env["BASE_IMAGE"] = base
    if ca := os.environ.get("TRLSTACK_CA_BUNDLE"):
        env["CA_BUNDLE"] = ca
    return env


def build_image(tag: str, log: Path, *options: str) -> None:
    """Build the image from this checkout with docker/build.sh (options go to its bake), or fail the test."""
    argv = ["bash", str(BUILD), "--progress=plain", *options, "--set", f"trlstack.tags={tag}"]
    with log.open("w") as out:
        done = subprocess.run(argv, cwd=REPO, env=bake_env(), stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-40:])
        pytest.fail(f"image build failed ({' '.join(argv)}), full log {log}:\n{tail}")


@pytest.fixture(scope="session")
def image_builder(docker_engine: str) -> Callable[..., None]:
    """build_image(tag, log, *options), for tests that build the image again."""
    return build_image


@pytest.fixture(scope="session")
def build_settings(docker_engine: str) -> Callable[[], dict[str, str]]:
    """bake_env(): the environment docker/build.sh gets in a test build, for tests that run it themselves."""
    return bake_env


@pytest.fixture(scope="session")
def trlstack_image(docker_engine: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Tag of the image built from this checkout; BuildKit's cache makes an up-to-date build seconds."""
    tag = os.environ.get("TRLSTACK_IMAGE", "trlstack:test")
    build_image(tag, tmp_path_factory.mktemp("image") / "build.log")
    return tag
