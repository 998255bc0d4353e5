"""The engine's build cache on a throwaway CI machine, where `.ci/run` sets TRLSTACK_TESTS_MAY_PRUNE=1: a test
that leaves gigabytes no later test builds from drops them there, so a run fits a machine with little disk.
Anywhere else nothing is pruned: a developer's cache is theirs."""

from __future__ import annotations

import os
import subprocess

from trlstack.defaults import Env


def may_prune() -> bool:
    return os.environ.get(Env.TESTS_MAY_PRUNE) == "1"


def prune(*, keep_downloads: bool) -> None:
    """Drop the build cache where allowed; keep_downloads keeps the cache mounts (uv's wheels, 7.7 GB)."""
    if not may_prune():
        return
    only = ["--filter", "type=regular"] if keep_downloads else []
    subprocess.run(["docker", "builder", "prune", "-af", *only], capture_output=True, check=True)
