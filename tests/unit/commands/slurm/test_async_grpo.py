"""trlstack slurm async-grpo: the job needs its server node and at most two trainer ranks, refused on the
submit host with the reason; a job that can run trains async-grpo against the server node."""

from __future__ import annotations

from dataclasses import replace

import pytest
from trlstack.commands.slurm.checks import check
from trlstack.commands.slurm.roles import trainer_command
from trlstack.errors import UsageError

from .harness import settings


def job(**changes):
    return check(settings(recipe="async-grpo", **changes))


@pytest.mark.parametrize(("nodes", "gpus"), [(2, 1), (2, 2), (3, 1)])
def test_one_or_two_trainer_ranks_against_the_server_node(nodes, gpus):
    argv = trainer_command(job(nodes=nodes, gpus_per_node=gpus))
    assert argv[:2] == ["train", "async-grpo"] and "--vllm-url" in argv
    assert "--vllm-mode" not in argv and "--cpu" not in argv


@pytest.mark.parametrize(("nodes", "gpus", "ranks"), [(2, 8, 8), (2, 4, 4), (3, 2, 4), (4, 1, 3)])
def test_more_trainer_ranks_are_refused_naming_trls_hangs(nodes, gpus, ranks):
    with pytest.raises(UsageError, match=f"async-grpo with {ranks} trainer processes.*6797 and 7103"):
        job(nodes=nodes, gpus_per_node=gpus)


def test_two_ranks_unsharded_are_refused():
    asked = settings(recipe="async-grpo", gpus_per_node=2)
    with pytest.raises(UsageError, match="--sharding none"):
        check(replace(asked, train=replace(asked.train, sharding="none")))


def test_vllm_inside_every_trainer_is_refused():
    with pytest.raises(UsageError, match="--serve-nodes 0 .*only through a vLLM server.*--serve-nodes 1"):
        job(serve_nodes=0, gpus_per_node=1)
