"""The CPU smoke across two trainer nodes, through real sbatch, srun and sacct: `train grpo --cpu` on each
node under `accelerate launch` multi-node (gloo), checkpoints on the shared volume, job COMPLETED."""

from __future__ import annotations

import pytest
from slurm_cluster import TINY
from trlstack.run.trl_config import SMOKE, SMOKE_BY_RECIPE

pytestmark = [pytest.mark.docker, pytest.mark.slurm]

STEPS = 3
RUN = "/shared/smoke"


def test_cpu_smoke_trains_one_model_across_two_nodes(cluster):
    job = cluster.submit(
        "grpo", "--cpu", "--nodes", "2", "--serve-nodes", "0", "--runtime", "none", "--output-dir", RUN,
        "--model", f"{TINY}/model", "--dataset", f"{TINY}/dataset",
        "--", "--max_steps", str(STEPS), "--save_total_limit", str(STEPS),
    )  # fmt: skip
    rows = cluster.wait_done(job, timeout=900)
    log = cluster.read_log(job)
    print(f"\n{cluster.sacct_table(job)}")
    states = {(row["JobName"], row["NodeList"]): (row["State"], row["ExitCode"]) for row in rows}
    assert states[("trlstack-grpo", "node[1-2]")] == ("COMPLETED", "0:0"), log[-4000:]
    assert states[("train", "node1")] == states[("train", "node2")] == ("COMPLETED", "0:0")

    # One trainer per node, ranks by node, meeting at the first node's cluster address.
    assert "[trainer 0 node1] train: machine rank 0 of 2, meeting at" in log
    assert "[trainer 1 node2] train: machine rank 1 of 2, meeting at" in log
    assert log.count("Training completed") == 2, log[-4000:]

    # Every step once, checkpoints complete on the shared volume.
    assert sorted(cluster.checkpoints(f"{RUN}/grpo")) == list(range(1, STEPS + 1))
    state = cluster.trainer_state(f"{RUN}/grpo/checkpoint-{STEPS}")
    logged = [entry for entry in state["log_history"] if "loss" in entry]
    assert [entry["step"] for entry in logged] == list(range(1, STEPS + 1))

    # Both processes trained one model: a step takes a batch from each, so an epoch has half as many steps
    # as one process would need (GRPO: prompts per step = processes x batch size / generations).
    rows_in_dataset = 64  # trlstack tiny's default
    per_step = 2 * SMOKE["per_device_train_batch_size"] / SMOKE_BY_RECIPE["grpo"]["num_generations"]
    assert logged[0]["epoch"] == pytest.approx(per_step / rows_in_dataset)
