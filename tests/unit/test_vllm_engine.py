"""trlstack.vllm_engine: vLLM's CUDA-IPC engine loading an unquantized dense model's weights in place, vLLM's
layerwise reload where that is not safe or a trainer asks for it; found through vLLM's own registry. Needs
vLLM (the image); tests/gpu/test_ipc.py shows the server following the trainer's weights through it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

REASON = "needs the gpu extra (vLLM); runs in the image"


@pytest.fixture
def engine_module():
    pytest.importorskip("vllm", reason=REASON)
    from trlstack import vllm_engine

    return vllm_engine


def make(module, quantization=None, model=None):
    import torch

    model = model if model is not None else torch.nn.Sequential(torch.nn.Linear(4, 4))
    config = SimpleNamespace(parallel_config=None, model_config=SimpleNamespace(quantization=quantization))
    transfer = SimpleNamespace(backend="trlstack-ipc")
    return module.InPlaceIPCEngine(transfer, config, torch.device("cpu"), model)


def test_vllm_finds_the_engine_by_its_backend_name(engine_module):
    from trlstack.vllm_plugin import ENGINE, register_engine
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory

    register_engine()
    register_engine()  # the plugin may run twice in a process
    found = WeightTransferEngineFactory._registry[ENGINE[0]]()
    assert found is engine_module.InPlaceIPCEngine
    assert issubclass(found, engine_module.import_ipc_engine().IPCWeightTransferEngine)


def test_an_unquantized_dense_model_loads_in_place_and_its_parameters_stay(engine_module):
    engine = make(engine_module)
    weight = engine.model[0].weight
    engine.start_weight_update()
    assert not engine.layerwise and engine.model[0].weight is weight and weight.device.type == "cpu"
    engine.finish_weight_update()
    assert engine.model[0].weight is weight


def test_a_quantized_model_or_a_fused_moe_goes_through_vllms_layerwise_reload(engine_module):
    import torch

    assert not make(engine_module, quantization="fp8").in_place
    fused_moe = type("FusedMoE", (torch.nn.Module,), {})  # vLLM's MoE layers, told by the class's name
    shared = type("SharedFusedMoE", (fused_moe,), {})
    assert not make(engine_module, model=torch.nn.Sequential(torch.nn.Linear(2, 2), shared())).in_place
    assert make(engine_module).in_place


def test_a_trainer_may_ask_for_the_layerwise_reload_and_not_for_in_place_where_unsafe(engine_module):
    engine = make(engine_module)
    engine.init_transfer_engine(engine.parse_init_info({"in_place": False}))
    assert not engine.in_place
    engine.init_transfer_engine(engine.parse_init_info({}))
    assert engine.in_place
    quantized = make(engine_module, quantization="fp8")
    quantized.init_transfer_engine(quantized.parse_init_info({"in_place": True}))
    assert not quantized.in_place
    with pytest.raises(ValueError, match="Invalid init_info"):
        engine.parse_init_info({"packed": True})
