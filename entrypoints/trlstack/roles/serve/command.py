"""`serve-vllm`: TRL's vLLM generation server, started exactly as TRL's guide says, on the GPUs it is given.

    VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config '{"backend": "nccl"}'
        --logprobs-mode processed_logprobs --max-logprobs -1 --host H --port P ...

Dev mode exposes unauthenticated endpoints that overwrite the served weights, so the server binds to loopback
unless told otherwise, and refuses addresses other machines could reach without --allow-public-bind.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from trlstack import addresses
from trlstack.addresses import resolved
from trlstack.command import Command, exec_command
from trlstack.defaults import VLLM_ENV, Env
from trlstack.errors import UsageError, run_main
from trlstack.gpus import PCI_BUS_ID, Gpu, nccl_host_id, visible_gpus
from trlstack.plan import SHARED_MEMORY_FRACTION, SPLIT_MEMORY_FRACTION
from trlstack.roles.command_line import Role, parse_role
from trlstack.roles.serve.settings import TAKEN, ServeSettings
from trlstack.run.passthrough import VLLM, check_passthrough, receiver

ROLE = Role(
    "serve-vllm",
    "Start TRL's vLLM generation server (dev-mode weight transfer over NCCL) on the visible GPUs. Arguments "
    "after `--` go to `vllm serve` unchanged.",
    prints="the command and its environment",
    chooses="the GPUs the server runs on",
)

# The flags TRL's guide starts the server with: weight sync over NCCL and the log-probabilities TRL reads.
TRL_SERVER_FLAGS = (
    "--weight-transfer-config",
    '{"backend": "nccl"}',
    "--logprobs-mode",
    "processed_logprobs",
    "--max-logprobs",
    "-1",
)


def check_bind(host: str, allow_public: bool, resolve: Callable[[str], list[str]] = resolved) -> None:
    """Refuse binds others could reach unless `allow_public`: dev mode lets any client replace weights. A
    private network's address is allowed: a server on another host must be reachable by its trainers."""

    def refusal(what: str) -> str:
        return (
            f"--host {host} binds the server on {what}, and the VLLM_SERVER_DEV_MODE endpoints "
            "(weight updates) have no authentication. Bind 127.0.0.1 or a private network address "
            f"(e.g. the compose service name), or pass --allow-public-bind ({Env.ALLOW_PUBLIC_BIND}=1) "
            "only where a firewall or an unpublished container network keeps others out."
        )

    addresses.check_bind(host, allow_public, refusal, private_ok=True, resolve=resolve)


def parallel_sizes(settings: ServeSettings, gpu_count: int) -> tuple[int, int]:
    """vLLM's tensor- and data-parallel sizes over the visible GPUs: by default one replica per GPU."""
    tp = settings.tensor_parallel_size or 1
    if tp > gpu_count:
        raise UsageError(
            f"--tensor-parallel-size {tp} needs {tp} GPUs, but {gpu_count} are visible; lower it or make "
            "more GPUs visible with CUDA_VISIBLE_DEVICES."
        )
    dp = settings.data_parallel_size or gpu_count // tp
    if tp * dp > gpu_count:
        raise UsageError(
            f"--tensor-parallel-size {tp} x --data-parallel-size {dp} needs {tp * dp} GPUs, but "
            f"{gpu_count} are visible; choose sizes whose product is at most {gpu_count}."
        )
    return tp, dp


def build_command(settings: ServeSettings, gpus: Sequence[Gpu]) -> Command:
    """The vLLM server command for the visible `gpus`; raises UsageError naming the fix for bad settings."""
    check_passthrough(settings.extra, receiver(VLLM), TAKEN, "serve-vllm")
    if not gpus:
        raise UsageError(
            "serve-vllm needs a CUDA GPU and none is visible. Run it on a machine with an NVIDIA GPU "
            "and driver, give the container GPUs (docker --gpus, or compose device reservations), check "
            "CUDA_VISIBLE_DEVICES, or try `train RECIPE --cpu` for a smoke run without vLLM."
        )
    tp, dp = parallel_sizes(settings, len(gpus))
    argv = ["vllm", "serve", settings.model, *TRL_SERVER_FLAGS]
    argv += ["--host", settings.host, "--port", str(settings.port)]
    argv += ["--tensor-parallel-size", str(tp), "--data-parallel-size", str(dp)]
    memory = settings.gpu_memory_utilization
    if memory is None:
        memory = SHARED_MEMORY_FRACTION if settings.share_gpus else SPLIT_MEMORY_FRACTION
    argv += ["--gpu-memory-utilization", str(memory)]
    if settings.max_model_len is not None:
        argv += ["--max-model-len", str(settings.max_model_len)]
    if settings.dtype != "auto":
        argv += ["--dtype", settings.dtype]
    env: dict[str, str] = {
        Env.VLLM_SERVER_DEV_MODE: "1",
        Env.CUDA_DEVICE_ORDER: PCI_BUS_ID,  # as NVML numbers
        **VLLM_ENV,
        **(nccl_host_id("serve") if settings.share_gpus else {}),
    }
    return Command(argv=argv + list(settings.extra), env=env)


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        environ = os.environ
        settings, args = parse_role(ROLE, ServeSettings, sys.argv[1:] if argv is None else argv, environ)
        check_bind(settings.host, settings.allow_public_bind)
        gpus = visible_gpus(environ) if args.gpus is None else [Gpu(index) for index in range(args.gpus)]
        command = build_command(settings, gpus)
        if args.print_command:
            print(command.shell())
            return 0
        exec_command(command, environ)
        return 0  # not reached: exec replaced this process

    return run_main("serve-vllm", body)
