"""The server fails: serve-vllm on the server node of a 3-node job refuses to start (these nodes have no
GPU) while the two trainers run; the job must end non-zero within 60 s, FAILED in sacct, its log naming the
server node and the cause, and no trainer process left on any node."""

from __future__ import annotations

import pytest
from slurm_cluster import NODES, TINY

pytestmark = [pytest.mark.docker, pytest.mark.slurm]

RUN = "/shared/server-failure"


def test_a_server_that_cannot_start_ends_the_job_and_leaves_no_trainer(cluster):
    job = cluster.submit(
        "grpo", "--cpu", "--nodes", "3", "--runtime", "none", "--output-dir", RUN,
        "--model", f"{TINY}/model", "--dataset", f"{TINY}/dataset", "--", "--max_steps", "1000",
    )  # fmt: skip
    rows = cluster.wait_done(job, timeout=300)
    log = cluster.read_log(job)
    print(f"\n{cluster.sacct_table(job)}")

    by_name = {row["JobName"]: row for row in rows if row["JobName"] in ("trlstack-grpo", "serve-vllm")}
    elapsed = cluster.elapsed(by_name["trlstack-grpo"])
    assert elapsed < 60, f"the job ran {elapsed} s before it ended"
    assert by_name["trlstack-grpo"]["State"] == "FAILED"
    assert by_name["trlstack-grpo"]["ExitCode"] == "1:0"
    assert (by_name["serve-vllm"]["State"], by_name["serve-vllm"]["NodeList"]) == ("FAILED", "node1")
    trainers = [row for row in rows if row["JobName"] == "train"]
    assert sorted(row["NodeList"] for row in trainers) == ["node2", "node3"]  # they were started

    assert "[server node1] serve-vllm: error: serve-vllm needs a CUDA GPU and none is visible" in log
    assert "error: vLLM server on node1 exited with 1; ending the job" in log

    for node in NODES:
        left = [line for line in cluster.processes(node) if any(word in line for word in ("train", "python"))]
        assert not left, f"{node} still runs {left}"
