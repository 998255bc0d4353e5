"""trlstack.transfer: the one rule that picks how weights reach the server, and the refusals of a transport
that cannot reach it; run/weight_transfer.py, what train hands its ranks from it."""

from __future__ import annotations

import pytest
from trlstack.errors import UsageError
from trlstack.run.settings import TrainSettings
from trlstack.run.weight_transfer import check_server, chosen, weight_transfer
from trlstack.transfer import check, describe, resolve


@pytest.mark.parametrize(
    ("asked", "share", "machines", "chosen"),
    [
        ("auto", True, 1, "ipc"),  # the roles share a GPU on one host
        ("auto", False, 1, "nccl"),
        ("auto", True, 2, "nccl"),  # across hosts IPC reaches only the server's
        ("nccl", True, 1, "nccl"),  # the override
        ("ipc", True, 1, "ipc"),
    ],
)
def test_auto_is_ipc_exactly_where_the_roles_share_their_gpus_on_one_host(asked, share, machines, chosen):
    assert resolve(asked, share, machines) == chosen


def test_ipc_is_refused_where_the_trainers_memory_is_not_on_the_servers_gpus():
    with pytest.raises(UsageError, match="must run on the same GPUs: add --share-gpus"):
        check("ipc", share_gpus=False)
    with pytest.raises(UsageError, match="reaches only the server's own host, and this run trains on 2"):
        check("ipc", share_gpus=True, machines=2)
    check("ipc", share_gpus=True)
    check("nccl", share_gpus=False, machines=4)


def test_each_transport_is_described_as_it_moves_the_weights():
    assert "CUDA IPC" in describe("ipc", True) and "memory speed" in describe("ipc", True)
    assert "NCCL sockets" in describe("nccl", True)
    assert "P2P/NVLink" in describe("nccl", False)


def run(**fields):
    return TrainSettings(**{"recipe": "grpo", **fields})


def test_train_hands_every_rank_the_transport_and_says_it():
    keys, env, notes = weight_transfer(run(share_gpus=True))
    assert (keys, env) == ({}, {"TRLSTACK_WEIGHT_TRANSFER": "ipc"})
    assert notes == [
        "weight transfer ipc (--weight-transfer auto): weights are pushed through CUDA IPC: the trainer "
        "hands the server handles to its own GPU memory (HTTP on loopback), the server copies them at "
        "memory speed"
    ]
    _, env, notes = weight_transfer(run(share_gpus=True, weight_transfer="nccl"))
    assert env == {"TRLSTACK_WEIGHT_TRANSFER": "nccl"} and "(--weight-transfer chosen)" in notes[0]
    assert weight_transfer(run(recipe="async-grpo", share_gpus=True))[1] == {
        "TRLSTACK_WEIGHT_TRANSFER": "ipc"
    }
    assert weight_transfer(run())[1] == {"TRLSTACK_WEIGHT_TRANSFER": "nccl"}


def test_a_run_without_a_server_has_no_transport():
    assert weight_transfer(run(vllm_mode="colocate")) == ({}, {}, [])
    assert weight_transfer(run(cpu=True)) == ({}, {}, [])


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"weight_transfer": "ipc"}, ["--weight-transfer ipc", "add --share-gpus"]),
        ({"weight_transfer": "ipc", "share_gpus": True, "num_machines": 2, "main_process_ip": "10.0.0.1"},
         ["reaches only the server's own host"]),
        ({"share_gpus": True, "vllm_url": "http://10.0.0.7:8000"},
         ["--vllm-url http://10.0.0.7:8000", "binds loopback only", "http://127.0.0.1:PORT"]),
        ({"weight_transfer": "ipc", "vllm_mode": "colocate"},
         ["this run has none", "vLLM inside the trainer"]),
        ({"weight_transfer": "nccl", "cpu": True}, ["this run has none", "--cpu: no vLLM"]),
    ],
)  # fmt: skip
def test_a_transport_that_cannot_reach_the_server_is_refused_naming_the_fix(fields, words):
    with pytest.raises(UsageError) as error:
        weight_transfer(run(**fields))
    assert all(word in str(error.value) for word in words), str(error.value)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://localhost:8100", "http://[::1]:8000"])
def test_a_loopback_server_takes_cuda_ipc(url):
    assert weight_transfer(run(share_gpus=True, vllm_url=url))[1]["TRLSTACK_WEIGHT_TRANSFER"] == "ipc"


def test_a_server_started_for_the_other_transport_is_refused_before_anything_starts():
    ipc, nccl = ({"weight_transfer_config": {"backend": b}} for b in ("ipc", "nccl"))
    check_server(ipc, chosen(run(share_gpus=True)), "http://127.0.0.1:8000")
    check_server(nccl, chosen(run()), "http://127.0.0.1:8000")
    check_server(nccl, chosen(run(vllm_mode="colocate")), "http://127.0.0.1:8000")  # no server to check
    with pytest.raises(UsageError) as error:
        check_server(nccl, chosen(run(share_gpus=True)), "http://127.0.0.1:8000")
    assert str(error.value).startswith("The vLLM server at http://127.0.0.1:8000 was started with the nccl")
    assert "give serve-vllm and train the same --weight-transfer" in str(error.value)
    with pytest.raises(UsageError, match="started with the ipc weight-transfer engine"):
        check_server(ipc, chosen(run()), "http://127.0.0.1:8000")
