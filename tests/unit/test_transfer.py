"""trlstack.transfer: the one rule that picks how weights reach the server, and the refusals of a transport
that cannot reach it (what train hands its ranks from it: run/test_weight_transfer.py)."""

from __future__ import annotations

import pytest
from trlstack.errors import UsageError
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
