"""Shared fixtures of the unit tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def no_exec(monkeypatch):
    """Fail the test if anything tries to replace this process: bad input must start nothing."""

    def refuse(*args, **kwargs):
        pytest.fail(f"exec was called with {args!r}")

    for name in ("execvpe", "execvp", "execve", "execv", "execl", "execlp"):
        monkeypatch.setattr(os, name, refuse)


@pytest.fixture
def machine(monkeypatch):
    """Make GPU discovery report the given GPUs (the NVIDIA driver is the external boundary replaced here)."""
    from trlstack import gpus

    def install(found, source="nvml", problem=None):
        found = tuple(gpus.Gpu(i) if isinstance(i, int) else i for i in found)
        result = gpus.Probe(found, source, problem)
        monkeypatch.setattr(gpus, "probe", lambda: result)
        return result

    return install
