"""run/weight_transfer.py: how this run's weights reach the vLLM server, decided before launch from
transfer.py's rule: what train hands every rank and says, the transports that cannot reach the server refused
with the fix, and a server started for the other transport refused before anything starts."""

from __future__ import annotations

import pytest
from trlstack.errors import UsageError
from trlstack.run.settings import TrainSettings
from trlstack.run.weight_transfer import check_server, chosen, weight_transfer


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
