"""Apptainer for real: the trlstack image turned into a .sif by `trlstack export` on the cluster, then the
CPU smoke across two nodes inside it (`srun apptainer exec`), as users without root run it on a cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
from slurm_cluster import TINY

pytestmark = [pytest.mark.docker, pytest.mark.slurm]

SIF = "/shared/trlstack.sif"
RUN = "/shared/apptainer"
# Converting holds the image about three times over at its peak (the `docker save` archive, the copy of
# its layers Apptainer makes, the unpacked root) besides the .sif (measured: 3.5 times the archive's size).
SPACE_PER_IMAGE_BYTE = 3.5


@pytest.fixture(scope="module")
def sif(cluster, trlstack_image):
    docker = ["docker", "info", "--format", "{{.DockerRootDir}}"]
    root = subprocess.run(docker, capture_output=True, text=True, check=True).stdout.strip()
    inspect = ["docker", "image", "inspect", "--format", "{{.Size}}", trlstack_image]
    needed = SPACE_PER_IMAGE_BYTE * int(subprocess.run(inspect, capture_output=True, text=True).stdout) / 1e9
    free = shutil.disk_usage(root).free / 1e9
    if free < needed and os.environ.get("TRLSTACK_TESTS_MAY_PRUNE") == "1":
        # A throwaway machine (.ci/run sets it): the engine's build cache is only ever rebuilt there.
        subprocess.run(["docker", "builder", "prune", "-af"], capture_output=True, check=True)
        free = shutil.disk_usage(root).free / 1e9
    if free < needed:
        pytest.fail(
            f"converting {trlstack_image} needs about {needed:.0f} GB free under {root}; {free:.0f} GB are"
        )
    archive = "/shared/trlstack.tar"
    started = time.monotonic()
    save = subprocess.Popen(["docker", "save", trlstack_image], stdout=subprocess.PIPE)
    assert save.stdout is not None
    done = cluster.run("sh", "-c", f"cat > {archive}", stdin=save.stdout, timeout=1800)
    assert save.wait() == 0 and done.returncode == 0, done.stderr
    saved = time.monotonic() - started
    made = cluster.run(
        "trlstack",
        "export",
        "--format",
        "sif",
        archive,
        "--output",
        SIF,
        "--compression",
        "zstd",
        timeout=1800,
    )
    cluster.run("rm", "-f", archive)
    assert made.returncode == 0, made.stderr[-4000:]
    digest = made.stdout.split()[0]
    size = int(cluster.run("stat", "--format=%s", SIF).stdout)
    exported = time.monotonic() - started - saved
    gigabytes = size / 1e9
    print(
        f"\n{trlstack_image} -> {SIF}: docker save {saved:.0f} s, export {exported:.0f} s, {gigabytes:.2f} GB"
    )
    yield SIF, digest
    cluster.run("rm", "-f", SIF, f"{SIF}.sha256")


def test_export_prints_the_sha256_of_the_sif_it_made(cluster, sif):
    path, digest = sif
    assert cluster.run("sha256sum", path).stdout.split()[0] == digest
    assert cluster.read(f"{path}.sha256") == f"{digest}  {path}\n"


def test_cpu_smoke_runs_inside_the_sif_on_two_nodes(cluster, sif):
    path, _ = sif
    job = cluster.submit(
        "grpo", "--cpu", "--nodes", "2", "--serve-nodes", "0", "--runtime", "apptainer", "--image", path,
        "--bind", TINY, "--output-dir", RUN, "--model", f"{TINY}/model", "--dataset", f"{TINY}/dataset",
        "--", "--max_steps", "2",
    )  # fmt: skip
    rows = cluster.wait_done(job, timeout=1200)
    log = cluster.read_log(job)
    print(f"\n{cluster.sacct_table(job)}")
    states = {(row["JobName"], row["NodeList"]): row["State"] for row in rows}
    assert states[("trlstack-grpo", "node[1-2]")] == "COMPLETED", log[-4000:]
    # Each trainer step ran train inside the .sif.
    assert states[("train", "node1")] == states[("train", "node2")] == "COMPLETED"
    lines = cluster.submit_lines(job, "train")
    assert len(lines) == 2 and all(f"{path} train grpo" in line for line in lines), lines
    assert all("apptainer exec --bind" in line for line in lines), lines
    assert "[trainer 0 node1] train: machine rank 0 of 2" in log
    assert log.count("Training completed") == 2
    assert sorted(cluster.checkpoints(f"{RUN}/grpo")) == [1, 2]
