"""Fixtures of the trlstack slurm tests."""

from __future__ import annotations

import os

import pytest
from trlstack.commands.slurm import host

from .harness import make_stubs


@pytest.fixture
def shared_tmp(tmp_path, monkeypatch):
    """The test's folder stands for shared storage (it is under /tmp, which is node-local on clusters)."""
    real = host.node_local

    def node_local(path, mounts=None):
        return None if path.startswith(str(tmp_path)) else real(path, mounts)

    monkeypatch.setattr(host, "node_local", node_local)
    return tmp_path


@pytest.fixture
def submit_host(shared_tmp, monkeypatch):
    """`sbatch` stand-in on PATH, the test's folder as shared storage; a config, and `trlstack slurm`'s
    argv for a 2 x 8 job."""
    monkeypatch.setenv("PATH", f"{make_stubs(shared_tmp)}{os.pathsep}{os.environ['PATH']}")
    for name, value in (("STUB_DIR", str(shared_tmp)), ("STUB_NODES", ""), ("STUB_ADDRS", "")):
        monkeypatch.setenv(name, value)
    config = shared_tmp / "mine.yaml"
    config.write_text("model_name_or_path: org/new\ndataset_name: d\nreward_funcs: [accuracy_reward]\n")
    return shared_tmp, ["slurm", "grpo", "--nodes", "2", "--gpus-per-node", "8", "--runtime", "none"]
