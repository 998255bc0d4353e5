"""Fixtures of the Slurm tests: the node image (the trlstack image plus Debian's Slurm, munge, MariaDB and
Apptainer) and one cluster for the session, with the tiny offline model and dataset on its shared volume.

These tests need the Docker engine (they skip without one, and fail in CI, which provisions it). Settings
(env): TRLSTACK_IMAGE (the image built from this checkout, see tests/conftest.py) and DEBIAN_MIRROR.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest
from slurm_cluster import CLUSTER_DIR, TINY, Cluster, image_tag


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slurm: runs jobs on the test Slurm cluster (needs a Docker engine)")


@pytest.fixture(scope="session")
def slurm_image(trlstack_image: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    tag = image_tag(trlstack_image)
    argv = ["docker", "buildx", "build", "--progress=plain", "--load", "--tag", tag]
    argv += ["--build-arg", f"TRLSTACK_IMAGE={trlstack_image}"]
    if mirror := os.environ.get("DEBIAN_MIRROR"):
        argv += ["--build-arg", f"DEBIAN_MIRROR={mirror}"]
    log = tmp_path_factory.mktemp("slurm-image") / "build.log"
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run([*argv, str(CLUSTER_DIR)], stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-40:])
        pytest.fail(f"node image build failed ({' '.join(argv)}), full log {log}:\n{tail}")
    print(f"\nnode image {tag} built in {time.monotonic() - started:.0f} s")
    return tag


@pytest.fixture(scope="session")
def cluster(slurm_image: str) -> Iterator[Cluster]:
    """A running cluster: slurmctld, slurmdbd and MariaDB on the controller, slurmd on node1..node3."""
    cluster = Cluster(slurm_image)
    started = time.monotonic()
    try:
        cluster.up()
        up = time.monotonic() - started
        made = cluster.run("trlstack", "tiny", TINY)
        assert made.returncode == 0, made.stderr[-3000:]
        print(f"\ncluster {cluster.project} up in {up:.0f} s (3 idle nodes, accounting), tiny assets made")
        yield cluster
    finally:
        stopping = time.monotonic()
        cluster.down()
        print(f"\ncluster {cluster.project} removed in {time.monotonic() - stopping:.0f} s")


@pytest.fixture(autouse=True)
def no_job_left(cluster: Cluster) -> Iterator[None]:
    """Whatever a test left running (when it failed, say) is cancelled before the next one starts."""
    yield
    cluster.cancel_all()
