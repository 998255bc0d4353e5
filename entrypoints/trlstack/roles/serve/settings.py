"""serve-vllm's settings, its public face: each field is a flag (--max-model-len) and a variable
(TRLSTACK_...), and the vLLM options it sets itself (TAKEN). `trlstack slurm` takes them as declared here."""

from __future__ import annotations

from dataclasses import dataclass, field

from trlstack.defaults import DEFAULT_MODEL, LOOPBACK, Env
from trlstack.option_types import fraction, one_of, positive_int
from trlstack.options import setting, switch
from trlstack.plan import SHARED_MEMORY_FRACTION, SPLIT_MEMORY_FRACTION
from trlstack.ports import http_port_setting

DTYPES = ("auto", "bfloat16", "float16", "half", "float", "float32")


@dataclass(frozen=True)
class ServeSettings:
    """serve-vllm's settings: each field is a flag (--max-model-len) and a variable (TRLSTACK_...)."""

    model: str | None = setting(
        Env.MODEL,
        f"model to serve (Hub id or local path; default: the --task's model, else {DEFAULT_MODEL})",
    )
    task: str | None = setting(
        Env.TASK,
        "a task folder (train --task): serve the model its config.yaml names, a folder in it included",
    )
    host: str = setting(Env.VLLM_HOST, "address to bind", LOOPBACK)
    port: int = http_port_setting()
    tensor_parallel_size: int | None = setting(
        Env.TENSOR_PARALLEL_SIZE, "GPUs per vLLM replica (default 1)", type=positive_int
    )
    data_parallel_size: int | None = setting(
        Env.DATA_PARALLEL_SIZE,
        "vLLM replicas (default: visible GPUs / tensor-parallel size)",
        type=positive_int,
    )
    gpu_memory_utilization: float | None = setting(
        Env.GPU_MEMORY_UTILIZATION,
        f"fraction of each GPU's memory vLLM may take (default {SPLIT_MEMORY_FRACTION}; with --share-gpus "
        f"{SHARED_MEMORY_FRACTION}, the trainer takes the rest)",
        type=fraction,
    )
    max_model_len: int | None = setting(
        Env.MAX_MODEL_LEN, "longest prompt + completion in tokens", type=positive_int
    )
    dtype: str = setting(Env.DTYPE, "weight and activation dtype", "auto", one_of(*DTYPES))
    share_gpus: bool = switch(
        Env.SHARE_GPUS,
        "the trainer runs on these GPUs too (a plan with SHARE_GPUS=1): name this role a host of its own "
        "to NCCL, which refuses two ranks on one GPU of one host; the weight push then goes over sockets",
    )
    allow_public_bind: bool = switch(
        Env.ALLOW_PUBLIC_BIND,
        "allow binding 0.0.0.0 or a public address (the dev-mode endpoints are unauthenticated)",
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
