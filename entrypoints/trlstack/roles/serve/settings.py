"""serve-vllm's settings, its public face: each field is a flag (--max-model-len) and a variable
(TRLSTACK_...), and the vLLM options it sets itself (TAKEN). `trlstack slurm` takes them as declared here."""

from __future__ import annotations

from dataclasses import dataclass, field

from trlstack.defaults import DEFAULT_MODEL, LOOPBACK, Env
from trlstack.option_types import fraction, one_of, positive_int
from trlstack.options import setting, switch
from trlstack.plan import SHARED_MEMORY_FRACTION, SPLIT_MEMORY_FRACTION
from trlstack.ports import http_port_setting
from trlstack.transfer import weight_transfer_setting

DTYPES = ("auto", "bfloat16", "float16", "half", "float", "float32")


@dataclass(frozen=True)
class ServeSettings:
    """serve-vllm's settings: each field is a flag (--max-model-len) and a variable (TRLSTACK_...)."""

    model: str = setting(Env.MODEL, "model to serve (Hub id or local path)", DEFAULT_MODEL)
    host: str = setting(Env.VLLM_HOST, "address to bind", LOOPBACK)
    port: int = http_port_setting()
    tensor_parallel_size: int | None = setting(
        Env.TENSOR_PARALLEL_SIZE, "GPUs per vLLM replica", type=positive_int, shown="1"
    )
    data_parallel_size: int | None = setting(
        Env.DATA_PARALLEL_SIZE,
        "vLLM replicas",
        type=positive_int,
        shown="the visible GPUs / the tensor-parallel size",
    )
    gpu_memory_utilization: float | None = setting(
        Env.GPU_MEMORY_UTILIZATION,
        "fraction of each GPU's memory vLLM may take (with --share-gpus the trainer takes the rest)",
        type=fraction,
        shown=f"{SPLIT_MEMORY_FRACTION}; with --share-gpus {SHARED_MEMORY_FRACTION}",
    )
    max_model_len: int | None = setting(
        Env.MAX_MODEL_LEN, "longest prompt + completion in tokens", type=positive_int, shown="the model's own"
    )
    dtype: str = setting(Env.DTYPE, "weight and activation dtype", "auto", one_of(*DTYPES))
    share_gpus: bool = switch(
        Env.SHARE_GPUS,
        "the trainer runs on these GPUs too (a plan with SHARE_GPUS=1): the weights come through CUDA IPC "
        "(--weight-transfer auto), or over NCCL, this role then naming itself a host of its own to NCCL, "
        "which refuses two ranks on one GPU of one host, so the push goes over sockets",
    )
    weight_transfer: str = weight_transfer_setting()
    allow_public_bind: bool = switch(
        Env.ALLOW_PUBLIC_BIND,
        "allow binding 0.0.0.0 or a public address (the dev-mode endpoints are unauthenticated; never "
        "with --weight-transfer ipc, whose server unpickles what it is sent)",
    )
    extra: list[str] = field(default_factory=list)  # after `--`: passed to `vllm serve` unchanged


# vLLM's settings (argparse dests) serve-vllm sets itself, and what to do instead: given again after `--`, or
# in a --config file there, they would silently win or clash.
_OWN = ["model", "host", "port", "tensor_parallel_size", "data_parallel_size", "gpu_memory_utilization"]
_OWN += ["max_model_len", "dtype"]
TAKEN = {dest: f"use serve-vllm's own --{dest.replace('_', '-')} (before `--`)" for dest in _OWN}
TAKEN |= dict.fromkeys(
    ("weight_transfer_config", "logprobs_mode", "max_logprobs"), "TRL needs the value serve-vllm sets"
)
