"""A task folder on the cluster's shared mount: `trlstack init` on the login node, `trlstack slurm grpo
--task` checks it there and submits; both trainer nodes train on its rewards and data. A broken task is
refused on the login node, naming the fix, before anything is queued."""

from __future__ import annotations

import pytest
from slurm_cluster import TINY
from test_bad_inputs import jobs_so_far

pytestmark = [pytest.mark.docker, pytest.mark.slurm]

RUN = "/shared/task-run"
CPU = ["--cpu", "--nodes", "2", "--serve-nodes", "0", "--runtime", "none", "--model", f"{TINY}/model"]


def test_a_task_on_the_shared_mount_trains_across_two_nodes(cluster):
    made = cluster.run("trlstack", "init", "/shared/task")
    assert made.returncode == 0, made.stderr
    checked = cluster.slurm("grpo", *CPU, "--task", "/shared/task", "--output-dir", RUN, "--dry-run")
    assert "trlstack slurm: task check: passed in " in checked.stderr, checked.stderr[-3000:]
    job = cluster.submit(
        "grpo", *CPU, "--task", "/shared/task", "--output-dir", RUN, "--", "--max_steps", "2"
    )
    rows = cluster.wait_done(job, timeout=900)
    log = cluster.read_log(job)
    states = {(row["JobName"], row["NodeList"]): (row["State"], row["ExitCode"]) for row in rows}
    assert states[("trlstack-grpo", "node[1-2]")] == ("COMPLETED", "0:0"), log[-4000:]
    for rank, node in ((0, "node1"), (1, "node2")):
        assert f"[trainer {rank} {node}] train: task check: passed in " in log, log[-4000:]
    assert "train: data data.jsonl (json, 1 file(s))" in log
    assert log.count("'rewards/correct_answer/mean'") == 2, log[-4000:]
    assert sorted(cluster.checkpoints(f"{RUN}/grpo")) == [1, 2]
    merged = cluster.read(f"{RUN}/grpo/trlstack-grpo.yaml")
    assert "/shared/task/data.jsonl" in merged and "rewards.brevity" in merged


def test_a_broken_task_is_refused_on_the_login_node_before_anything_is_queued(cluster):
    made = cluster.run("bash", "-c", "trlstack init /shared/broken && rm /shared/broken/data.jsonl")
    assert made.returncode == 0, made.stderr
    before = jobs_so_far(cluster)
    done = cluster.slurm(
        "grpo", *CPU, "--task", "/shared/broken", "--output-dir", "/shared/broken-run", "--submit"
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "trlstack: error: task check: 1 problem(s), nothing was started:" in done.stderr
    assert "config.yaml: dataset_name: the data data.jsonl does not exist" in done.stderr
    assert jobs_so_far(cluster) == before
