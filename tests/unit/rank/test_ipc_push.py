"""trlstack.rank.ipc_push: the weight push through CUDA IPC in every rank. Its pure parts, the NCCL join's
check against stand-in endpoints on loopback (conftest.py), every rank's part in each recipe's push with
stand-ins for TRL's classes and vLLM's sender (no torch or TRL needed), and, where the gpu extra is
installed, that TRL and vLLM still have every name it replaces or calls. tests/gpu/test_ipc.py runs it
for real."""

from __future__ import annotations

import importlib
import inspect
import sys
from types import SimpleNamespace

import pytest
from trlstack.rank import ipc_push
from trlstack.rank.ipc_push import buffer_bytes, transfer_from

GIB = 1 << 30


def test_the_packed_buffer_holds_the_largest_parameter_at_least():
    assert buffer_bytes(10, packed=GIB) == GIB
    assert buffer_bytes(1_090_011_136, packed=GIB) == 1_090_011_136  # Qwen2.5-7B's embedding, bf16
    assert buffer_bytes(10, packed=None) is None  # one handle per parameter


def test_a_model_of_one_buffer_is_packed_and_a_larger_one_shares_its_parameters_where_it_can():
    assert ipc_push.choose_buffer(990_000_000, 272_000_000, shareable=True) == GIB  # 0.5B: one handle
    assert ipc_push.choose_buffer(3_090_000_000, 467_000_000, shareable=True) is None  # 1.5B: unpacked
    # PEFT's merged weights or FSDP2's gathered copies are copied out, whatever the size
    assert ipc_push.choose_buffer(3_090_000_000, 467_000_000, shareable=False) == GIB
    assert ipc_push.choose_buffer(15_200_000_000, 1_090_011_136, shareable=False) == 1_090_011_136


def test_without_peft_or_fsdp_loaded_a_models_parameters_are_shared_as_they_are():
    big = SimpleNamespace(parameters=lambda: [Param(GIB), Param(GIB // 2)])
    if "peft" not in sys.modules and "torch.distributed.tensor" not in sys.modules:
        assert ipc_push.shares_safely(big)
        assert ipc_push.model_buffer(big) is None  # 3 GiB of bf16 parameters
    assert ipc_push.model_buffer(Model()) == GIB


def test_the_ranks_read_the_transport_train_hands_them():
    assert transfer_from({}) is None and transfer_from({"TRLSTACK_WEIGHT_TRANSFER": ""}) is None
    assert transfer_from({"TRLSTACK_WEIGHT_TRANSFER": "ipc"}) == "ipc"
    with pytest.raises(SystemExit, match="'shm' is not ipc or nccl"):
        transfer_from({"TRLSTACK_WEIGHT_TRANSFER": "shm"})


# Every rank's part, with vLLM's sender replaced by a recorder: which walk each rank sends, and which holds
# the server.


@pytest.fixture
def sent(monkeypatch):
    calls = []

    def record(items, server, buffer):
        calls.append(([name for name, _ in items], server, buffer))

    monkeypatch.setattr(ipc_push, "send", record)
    return calls


class Param:
    def __init__(self, numel, size=2):
        self.n, self.size = numel, size

    def numel(self):
        return self.n

    def element_size(self):
        return self.size


class Model:
    def parameters(self):
        return [Param(10), Param(300), Param(20)]


class Client:
    def __init__(self):
        self.resets = 0
        setattr(self, ipc_push.SERVER_ATTRIBUTE, "the server")

    def reset_prefix_cache(self):
        self.resets += 1


class Generation:
    def __init__(self, mode="server", main=True):
        self.mode, self.accelerator, self.model = mode, SimpleNamespace(is_main_process=main), Model()
        self.vllm_client = Client() if main else None
        self.pushed_by_trl = False

    def _iter_named_params(self):
        yield from (("a", 1), ("b", 2))

    def sync_weights(self):
        self.pushed_by_trl = True


def test_grpo_and_rloo_every_rank_sends_its_walk_and_the_first_holds_the_server(sent):
    sync = ipc_push.generation_sync(Generation.sync_weights)
    first, other = Generation(), Generation(main=False)
    sync(first)
    sync(other)
    assert sent == [(["a", "b"], "the server", GIB), (["a", "b"], None, GIB)]
    assert first.vllm_client.resets == 1 and not first.pushed_by_trl and not other.pushed_by_trl


def test_colocate_keeps_trls_own_push(sent):
    colocated = Generation(mode="colocate")
    ipc_push.generation_sync(Generation.sync_weights)(colocated)
    assert colocated.pushed_by_trl and sent == []


class OnlineDPO:
    def __init__(self, mode="server", main=True):
        self.vllm_mode, self.accelerator = mode, SimpleNamespace(is_main_process=main, device="cpu")
        self.vllm_client = Client() if main else None
        self.model = SimpleNamespace(parameters=Model().parameters)
        self.moved_by_trl = False

    def _move_model_to_vllm(self):
        self.moved_by_trl = True


def test_online_dpo_every_rank_sends_the_walk_the_push_guard_notes(sent, monkeypatch):
    walked = []

    def walk(trainer):
        walked.append(trainer)
        yield ("w", 1)

    monkeypatch.setattr(ipc_push, "online_dpo_params", walk)  # as push_guard.guard_ipc replaces it
    move = ipc_push.online_dpo_move(OnlineDPO._move_model_to_vllm)
    first, other = OnlineDPO(), OnlineDPO(main=False)
    move(first)
    move(other)
    assert sent == [(["w"], "the server", GIB), (["w"], None, GIB)] and walked == [first, other]
    colocated = OnlineDPO(mode="colocate")
    move(colocated)
    assert colocated.moved_by_trl and len(sent) == 2


class AsyncTrainer:
    def __init__(self, main):
        self.accelerator = SimpleNamespace(is_main_process=main, unwrap_model=lambda model: model)
        self.model = Model()

    def _streaming_iter(self):
        yield from (("x", 1), ("y", 2))


def test_async_grpo_the_first_rank_sends_through_its_transfer_and_the_others_from_their_drained_walk(sent):
    walk = ipc_push.async_walk(AsyncTrainer._streaming_iter)
    assert list(walk(AsyncTrainer(main=True))) == [("x", 1), ("y", 2)] and sent == []
    assert list(walk(AsyncTrainer(main=False))) == []  # TRL drains it; the walk went to the send
    assert sent == [(["x", "y"], None, GIB)]


def test_async_grpos_first_rank_sizes_the_buffer_from_trls_manifest(sent, monkeypatch):
    monkeypatch.setattr(ipc_push, "shape_bytes", lambda shape, dtype: shape[0] * {"bfloat16": 2}[dtype])
    transfer = SimpleNamespace(_weight_update_info={"shapes": [[10], [300]], "dtype_names": ["bfloat16"] * 2})
    setattr(transfer, ipc_push.SERVER_ATTRIBUTE, "the server")
    ipc_push.async_send(transfer, iter([("x", 1)]))
    assert sent == [(["x"], "the server", GIB)]


def test_the_nccl_join_checks_the_servers_engine_first(endpoints):
    url, handler = endpoints
    joined = []
    join = ipc_push.checked_join(lambda client, device=0: joined.append(device))
    with pytest.raises(RuntimeError, match="started with the trlstack-ipc weight-transfer engine"):
        join(SimpleNamespace(base_url=url), device=3)
    handler.backend = "nccl"
    join(SimpleNamespace(base_url=url), device=3)
    assert joined == [3]


# Against the real libraries, where installed (the image; the GPU host).


def test_trl_and_vllm_still_have_every_name_the_ipc_push_replaces_or_calls(monkeypatch):
    pytest.importorskip("trl", reason="needs the gpu extra (TRL); runs in the image")
    pytest.importorskip("vllm", reason="needs the gpu extra (vLLM); runs in the image")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    for where, names in [
        (ipc_push.GENERATION, ["sync_weights", "_iter_named_params", "_fix_param_name_to_vllm"]),
        (ipc_push.ONLINE_DPO, ["_move_model_to_vllm", "_fix_param_name_to_vllm"]),
        (ipc_push.CLIENT, ["init_communicator", "reset_prefix_cache"]),
        (ipc_push.ASYNC_TRAINER, ["_streaming_iter", "_sync_weight_merged"]),
        (ipc_push.ASYNC_TRANSFER, ["init_weight_transfer", "send_weights", "destroy"]),
    ]:
        cls = ipc_push.load(where)
        assert all(callable(getattr(cls, name, None)) for name in names), (where, names)
    source = inspect.getsource(ipc_push.load(ipc_push.ASYNC_TRAINER)._sync_weight_merged)
    assert "self.weight_transfer.send_weights(self._streaming_iter())" in source
    assert "for _ in self._streaming_iter():" in source  # the other ranks only drain it
    engine = ipc_push.import_ipc_engine()
    parameters = inspect.signature(engine.IPCTrainerSendWeightsArgs).parameters
    assert {"send_mode", "packed", "packed_buffer_size_bytes"} <= set(parameters)
    info = inspect.signature(engine.IPCWeightTransferUpdateInfo).parameters
    assert {"names", "dtype_names", "shapes", "ipc_handles_pickled", "tensor_sizes", "packed"} <= set(info)
    assert "ray" not in sys.modules or importlib.util.find_spec("ray") is not None  # no stand-in left


def test_a_peft_model_is_copied_out_and_a_plain_torch_model_shared_as_it_is():
    torch = pytest.importorskip("torch", reason="needs the gpu extra (torch, peft); runs in the image")
    peft = pytest.importorskip("peft", reason="needs the gpu extra (torch, peft); runs in the image")

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(x)

    plain = Tiny()
    assert ipc_push.shares_safely(plain)
    adapted = peft.get_peft_model(Tiny(), peft.LoraConfig(r=2, target_modules=["proj"]))
    assert not ipc_push.shares_safely(adapted)
