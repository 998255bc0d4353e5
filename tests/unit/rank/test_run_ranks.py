"""trlstack.rank.run.shared_gpu_rank: what a rank sharing its GPU with others (train --ranks-per-gpu K)
changes in its environment before torch starts. Pure: no torch needed."""

from __future__ import annotations

import pytest
from trlstack.rank.run import shared_gpu_rank


def test_a_rank_alone_on_its_gpu_changes_nothing():
    assert shared_gpu_rank({"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "0,1"}) == {}
    assert shared_gpu_rank({"LOCAL_RANK": "1", "TRLSTACK_RANKS_PER_GPU": "1"}) == {}


def test_outside_a_launcher_nothing_changes():
    assert shared_gpu_rank({"TRLSTACK_RANKS_PER_GPU": "2"}) == {}


@pytest.mark.parametrize(("rank", "gpu"), [(0, "3"), (1, "3"), (2, "5"), (3, "5")])
def test_consecutive_ranks_share_a_gpu_and_each_is_a_host_of_its_own(rank, gpu):
    env = {"LOCAL_RANK": str(rank), "TRLSTACK_RANKS_PER_GPU": "2", "CUDA_VISIBLE_DEVICES": "3,5"}
    env["NCCL_HOSTID"] = "node7-trlstack-train"  # train's own, with --share-gpus beside a server
    assert shared_gpu_rank(env) == {
        "NCCL_HOSTID": f"node7-trlstack-train-rank{rank}",
        "CUDA_VISIBLE_DEVICES": gpu,  # the rank sees only its GPU, as device 0 ...
        "LOCAL_RANK": "0",  # ... and is local rank 0 of 1: accelerate's barrier names device 0
        "LOCAL_WORLD_SIZE": "1",
    }


def test_without_visible_devices_the_gpus_are_counted_from_zero(monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "box")
    changed = shared_gpu_rank({"LOCAL_RANK": "3", "TRLSTACK_RANKS_PER_GPU": "2"})
    assert changed["CUDA_VISIBLE_DEVICES"] == "1"
    assert changed["NCCL_HOSTID"] == "box-trlstack-train-rank3"
