"""Fixtures of the trlstack slurm tests."""

from __future__ import annotations

import pytest
from trlstack.commands.slurm import host


@pytest.fixture
def shared_tmp(tmp_path, monkeypatch):
    """The test's folder stands for shared storage (it is under /tmp, which is node-local on clusters)."""
    real = host.node_local

    def node_local(path, mounts=None):
        return None if path.startswith(str(tmp_path)) else real(path, mounts)

    monkeypatch.setattr(host, "node_local", node_local)
    return tmp_path
