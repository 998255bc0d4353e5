"""The CUDA-IPC weight-transfer engine serve-vllm starts where the roles share their GPUs
(`--weight-transfer-config '{"backend": "trlstack-ipc"}'`): vLLM's own, loading the weights in place.

vLLM's IPC engine treats every update as a checkpoint to re-process: `start_weight_update` moves each layer's
parameters onto the meta device and wraps their loaders, every loaded weight is buffered until its layer is
whole, then the layer is re-materialised, processed and copied back (`finalize_layerwise_reload`). That is
what a quantized model needs, whose kernels hold processed weights. An unquantized dense model's parameters
are the weights themselves, so the loaders can copy each one straight into its place, as TRL's colocate
mode loads them (`model.load_weights`, no layerwise reload). This engine does that where it is safe: no
quantization and no fused-MoE layer (whose kernels may hold weights re-arranged after loading); elsewhere,
and when a trainer asks at `/init_weight_transfer_engine` (`{"in_place": false}`), vLLM's layerwise path.

The module imports vLLM: vLLM's workers load it through the factory entry vllm_plugin.py registers, only
where a server asks for this engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trlstack.vllm_plugin import import_ipc_engine

_ipc: Any = import_ipc_engine()  # vLLM's module, without ray (vllm_plugin.py)


@dataclass
class InPlaceInitInfo(_ipc.IPCWeightTransferInitInfo):  # type: ignore[misc]  # vLLM's types are not checked
    """What a trainer may say at /init_weight_transfer_engine: whether updates load in place (where safe)."""

    in_place: bool = True


def in_place_safe(quantization: str | None, modules: Iterable[Any]) -> bool:
    """Whether a model's weights may be loaded in place: unquantized, and no fused-MoE layer. MoE layers are
    told by their classes' names (vLLM's FusedMoE and its subclasses), so that deciding imports none of
    vLLM's MoE kernels."""
    fused_moe = any(cls.__name__ == "FusedMoE" for module in modules for cls in type(module).__mro__)
    return quantization is None and not fused_moe


class InPlaceIPCEngine(_ipc.IPCWeightTransferEngine):  # type: ignore[misc]
    """vLLM's IPC engine whose updates skip the layerwise reload where the model allows it."""

    init_info_cls = InPlaceInitInfo

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_place = self.safe()
        self.layerwise = False  # whether the update now open went through vLLM's layerwise reload

    def safe(self) -> bool:
        return in_place_safe(getattr(self.model_config, "quantization", None), self.model.modules())

    def init_transfer_engine(self, init_info: InPlaceInitInfo) -> None:
        self.in_place = init_info.in_place and self.safe()

    def start_weight_update(self) -> None:
        self.layerwise = not self.in_place
        if self.layerwise:
            super().start_weight_update()

    def finish_weight_update(self) -> None:
        if self.layerwise:
            super().finish_weight_update()
        self.layerwise = False
