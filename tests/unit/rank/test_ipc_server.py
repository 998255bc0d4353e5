"""trlstack.rank.ipc_server: the vLLM server's weight-update endpoints as the CUDA-IPC push calls them,
against a stand-in of them on loopback (conftest.py); the update as vLLM's HTTP transport sends it; a server
started for the other transport named at once."""

from __future__ import annotations

import base64
import json
import pickle
from types import SimpleNamespace

import pytest
from trlstack.rank.ipc_server import Server, backend_of, check_backend, http_update
from trlstack.transfer import BACKENDS


def test_the_update_is_sent_as_vllms_http_transport_sends_it():
    info = SimpleNamespace(
        names=["a", "b"], dtype_names=["bfloat16"] * 2, shapes=[[2], [3]], packed=True, tensor_sizes=[4, 6],
        ipc_handles={"GPU-1": ("handle", 7)},
    )  # fmt: skip
    update = http_update(info)
    assert pickle.loads(base64.b64decode(update.pop("ipc_handles_pickled"))) == {"GPU-1": ("handle", 7)}
    assert update == {
        "names": ["a", "b"], "dtype_names": ["bfloat16"] * 2, "shapes": [[2], [3]], "packed": True,
        "tensor_sizes": [4, 6],
    }  # fmt: skip
    json.dumps(update)  # it travels as JSON
    info.tensor_sizes, info.packed = None, False
    assert "tensor_sizes" not in http_update(info)


def test_the_servers_engine_is_read_from_server_info():
    assert (
        backend_of({"vllm_config": {"weight_transfer_config": {"backend": "trlstack-ipc"}}}) == "trlstack-ipc"
    )
    assert backend_of({"vllm_config": {"weight_transfer_config": None}}) is None


@pytest.mark.parametrize(
    ("backend", "transfer", "words"),
    [
        ("nccl", "ipc", ["started with the nccl weight-transfer engine", "pushes its weights through ipc",
                         "--weight-transfer nccl"]),
        ("trlstack-ipc", "nccl", ["started with the trlstack-ipc weight-transfer engine",
                                  "auto picks ipc for both"]),
        (None, "ipc", ["was started with none"]),
    ],
)  # fmt: skip
def test_a_server_started_for_the_other_transport_is_named_at_once(backend, transfer, words):
    with pytest.raises(RuntimeError) as error:
        check_backend(backend, transfer, "http://127.0.0.1:8000")
    assert all(word in str(error.value) for word in words), str(error.value)
    check_backend(BACKENDS[transfer], transfer, "http://127.0.0.1:8000")


def test_a_trainer_pushing_through_ipc_also_takes_vllms_own_ipc_engine():
    check_backend("ipc", "ipc", "http://127.0.0.1:8000")  # a plain `vllm serve` with the IPC engine
    with pytest.raises(RuntimeError, match="started with the ipc weight-transfer engine"):
        check_backend("ipc", "nccl", "http://127.0.0.1:8000")


def test_the_first_rank_joins_starts_loads_and_finishes_over_http(endpoints):
    url, handler = endpoints
    server = Server(url + "/")
    server.join("ipc")
    server.start()
    server.load({"names": ["a"]})
    server.finish()
    assert handler.seen == [
        ("/init_weight_transfer_engine", {"init_info": {}}),
        ("/start_weight_update", {}),
        ("/update_weights", {"update_info": {"names": ["a"]}}),
        ("/finish_weight_update", {}),
    ]


def test_a_refused_update_names_the_server_the_step_and_its_answer(endpoints):
    url, handler = endpoints
    handler.failing = "/update_weights"
    with pytest.raises(RuntimeError, match=r"answered /update_weights with 500: .*CUDA out of memory"):
        Server(url).load({"names": ["a"]})
    handler.backend = "nccl"
    with pytest.raises(RuntimeError, match="started with the nccl weight-transfer engine"):
        Server(url).join("ipc")
    assert [path for path, _ in handler.seen] == ["/update_weights"]  # a wrong engine is not initialised


def test_a_trainer_may_ask_for_vllms_layerwise_reload_at_the_join(endpoints):
    url, handler = endpoints
    Server(url).join("ipc", in_place=False)
    assert handler.seen == [("/init_weight_transfer_engine", {"init_info": {"in_place": False}})]
