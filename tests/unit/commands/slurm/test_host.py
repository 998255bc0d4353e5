"""The submit host's checks: shared storage, sbatch and the runtime."""

from __future__ import annotations

import pytest
from trlstack.commands.slurm.host import host_checks, node_local
from trlstack.errors import UsageError

from .harness import settings


def test_the_submit_host_must_have_the_runtime_and_sbatch():
    absent = lambda name: None  # noqa: E731
    with pytest.raises(UsageError, match="`apptainer` is not on PATH on this host"):
        host_checks(settings(), submit=False, which=absent, mounts="")
    with pytest.raises(UsageError, match="`sbatch` is not on PATH: submit from a Slurm login node"):
        host_checks(settings(), submit=True, which=absent, mounts="")
    with pytest.raises(UsageError, match="the Pyxis plugin is not installed"):
        host_checks(settings(runtime="pyxis", image="trlstack:1"), submit=False, which=absent, mounts="")


def test_node_local_folders_are_told_from_shared_ones():
    mounts = "\n".join([
        "overlay / overlay rw 0 0",
        "nfs:/export/home /home nfs4 rw 0 0",
        "tmpfs /scratch/ram tmpfs rw 0 0",
        "lustre@o2ib:/fs /lustre lustre rw 0 0",
    ])  # fmt: skip
    assert node_local("/home/me/runs", mounts) is None
    assert node_local("/lustre/project/runs", mounts) is None
    assert "tmpfs" in node_local("/scratch/ram/runs", mounts)
    assert "overlay" in node_local("/opt/runs", mounts)
    assert node_local("/tmp/runs", mounts) == "/tmp is local to each node"
