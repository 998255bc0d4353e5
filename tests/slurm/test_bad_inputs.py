"""Bad requests on the cluster's login node: `trlstack slurm --submit` refuses each with a message naming the
fix, exit 1, and submits nothing (the cluster's job count does not move)."""

from __future__ import annotations

import pytest
from slurm_cluster import TINY

pytestmark = [pytest.mark.docker, pytest.mark.slurm]

CPU = ["--cpu", "--runtime", "none", "--output-dir", "/shared/bad", "--model", f"{TINY}/model"]
BAD = [
    (["--nodes", "1", *CPU], "--nodes 1: a Slurm run spans at least 2 nodes"),
    (
        ["--nodes", "2", "--serve-nodes", "2", *CPU],
        "--serve-nodes 2 with --nodes 2 leaves no node to train on",
    ),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--tensor-parallel-size", "3", "--runtime", "none"],
        "--tensor-parallel-size 3 (TRLSTACK_TENSOR_PARALLEL_SIZE) does not divide the 8 serving GPUs "
        "(the server node's 8 GPUs: --gpus-per-node 8); choose one of 1, 2, 4, 8",
    ),
    (
        ["--nodes", "2", "--cpu", "--runtime", "apptainer", "--image", "/shared/missing.sif"],
        "--image /shared/missing.sif does not exist",
    ),
    (
        ["--nodes", "2", "--cpu", "--runtime", "pyxis", "--image", "trlstack:latest"],
        "this cluster's srun has no --container-image (the Pyxis plugin is not installed)",
    ),
    (
        ["--nodes", "2", "--cpu", "--runtime", "none", "--output-dir", "/tmp/out"],
        "is not shared between nodes",
    ),
]


def jobs_so_far(cluster) -> str:
    return cluster.run("sacct", "--allusers", "--noheader", "--allocations", "--starttime=2000-01-01",
                       "--format=JobID").stdout  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[message[:40] for _, message in BAD])
def test_a_bad_request_is_refused_before_anything_is_submitted(cluster, argv, message):
    before = jobs_so_far(cluster)
    done = cluster.slurm("grpo", *argv, "--submit")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "trlstack: error: " in done.stderr
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert jobs_so_far(cluster) == before


def test_another_run_in_the_run_folder_is_refused_before_anything_is_submitted(cluster):
    # A run train left on the shared volume, of another model than this request's.
    lines = [f"model_name_or_path: {TINY}/other", f"dataset_name: {TINY}/dataset", "reward_funcs: [x]"]
    script = f"mkdir -p /shared/stale/grpo/checkpoint-2 && printf '%s\\n' {' '.join(map(repr, lines))}"
    left = cluster.run("bash", "-c", f"{script} > /shared/stale/grpo/trlstack-grpo.yaml")
    assert left.returncode == 0, left.stderr
    before = jobs_so_far(cluster)
    argv = ["--nodes", "2", "--cpu", "--runtime", "none", "--output-dir", "/shared/stale"]
    done = cluster.slurm(
        "grpo", *argv, "--model", f"{TINY}/model", "--dataset", f"{TINY}/dataset", "--submit"
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "/shared/stale/grpo holds another run than this one" in done.stderr
    assert f"model_name_or_path: {TINY}/other -> {TINY}/model" in done.stderr
    assert jobs_so_far(cluster) == before
