"""Preemption: `scancel --signal=USR1 --batch` mid-run (what Slurm sends --stop-grace seconds before the
time limit) stops the trainers with SIGTERM on both nodes; every training process finishes the step in
progress, they save a checkpoint at that step together, and the job is requeued. The next attempt resumes
from that checkpoint on the shared volume: no step is trained twice, and the run ends with every step once."""

from __future__ import annotations

import re
import time

import pytest
from slurm_cluster import TINY

pytestmark = [pytest.mark.docker, pytest.mark.slurm]

# The stop is sent once the first periodic checkpoint is complete; it lands some steps later (the signal goes
# through the batch script, scancel and train to every process): 10 steps later on a fast machine, whose CPU
# steps take under half a second, which a save every 10 steps turned into a stop on a periodic save. A save
# every 25 steps leaves the stop 24 steps to land between two saves.
STEPS = 50
SAVE_STEPS = 25
RUN = "/shared/preemption"


def step_at_stop(log: str) -> int:
    """The step the trainers stopped at, as train says when the stop reaches it (its progress bar and TRL's
    loss lines share the output unevenly, so counting loss lines is no measure)."""
    (step,) = map(
        int, re.findall(r"train: SIGTERM: step (\d+) done; saving checkpoint-\1, then stopping", log)
    )
    return step


def test_a_stopped_job_is_requeued_and_resumes_from_its_newest_checkpoint(cluster):
    job = cluster.submit(
        "grpo", "--cpu", "--nodes", "2", "--serve-nodes", "0", "--runtime", "none", "--output-dir", RUN,
        "--model", f"{TINY}/model", "--dataset", f"{TINY}/dataset",
        "--", "--max_steps", str(STEPS), "--save_steps", str(SAVE_STEPS), "--save_total_limit", str(STEPS),
    )  # fmt: skip
    # Stop between two saves: once the first periodic checkpoint is complete.
    cluster.wait_until(job, {"RUNNING"}, timeout=300)
    deadline = time.monotonic() + 600
    while SAVE_STEPS not in cluster.checkpoints(f"{RUN}/grpo"):
        assert cluster.state(job)[0] == "RUNNING", cluster.read_log(job)[-4000:]
        assert time.monotonic() < deadline, "not past the first checkpoint in 600 s"
        time.sleep(0.5)
    stop = cluster.run("scancel", "--signal=USR1", "--batch", job)
    assert stop.returncode == 0, stop.stderr

    # Requeued: pending again. Slurm holds a requeued job back for two minutes; release it once the nodes are
    # done with the first attempt (a launch on a node still completing it fails the second attempt at once).
    assert cluster.wait_until(job, {"PENDING"}, timeout=300) == "PENDING"
    cluster.wait_nodes_idle(timeout=300)
    before = {step: cluster.fingerprint(path) for step, path in cluster.checkpoints(f"{RUN}/grpo").items()}
    released = cluster.run("scontrol", "update", f"JobId={job}", "StartTime=now")
    assert released.returncode == 0, released.stderr
    rows = cluster.wait_done(job, timeout=900)
    log = cluster.read_log(job)
    print(f"\n{cluster.sacct_table(job)}")

    attempts = [row["State"] for row in rows if row["JobName"] == "trlstack-grpo"]
    assert attempts == ["REQUEUED", "COMPLETED"], log[-4000:]
    first, second = log.split("attempt 2:", 1)
    assert "stop requested: SIGTERM to the trainers" in first
    assert "[trainer 0 node1] train: SIGTERM: the training processes save a checkpoint" in first
    assert "[trainer 1 node2] train: SIGTERM: the training processes save a checkpoint" in first
    assert "trainer (machine rank 1) on node2 stopped (exit 143)" in first
    resumed = max(before)
    assert f"[trainer 0 node1] train: resuming from {RUN}/grpo/checkpoint-{resumed}" in second
    assert f"[trainer 1 node2] train: resuming from {RUN}/grpo/checkpoint-{resumed}" in second

    # The run ends with every step exactly once, and what was saved before the stop is kept as it was.
    final = cluster.trainer_state(f"{RUN}/grpo/checkpoint-{STEPS}")
    assert final["global_step"] == STEPS
    assert [entry["step"] for entry in final["log_history"] if "loss" in entry] == list(range(1, STEPS + 1))
    for step, fingerprint in before.items():
        assert cluster.fingerprint(f"{RUN}/grpo/checkpoint-{step}") == fingerprint, (
            f"checkpoint-{step} changed"
        )

    # Steps lost to the stop: those trained after the newest checkpoint. The stop came between two periodic
    # saves, and the checkpoint the stop wrote holds the step reached: none is trained again.
    reached = step_at_stop(first)
    lost = reached - resumed
    words = ("stop requested", "SIGTERM", "stopped", "resuming from", "requeueing")
    print("\n".join(line for line in log.splitlines() if any(word in line for word in words)))
    print(f"stopped at step {reached}, resumed from checkpoint-{resumed}: {lost} step(s) trained again")
    assert reached % SAVE_STEPS, f"stopped at step {reached}, a periodic save: the test shows nothing"
    assert lost == 0
