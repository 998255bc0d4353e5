"""`serve-vllm`: TRL's vLLM generation server, started exactly as TRL's guide says, on the GPUs it is given.

    VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config '{"backend": "nccl"}'
        --logprobs-mode processed_logprobs --max-logprobs -1 --host H --port P ...

Dev mode exposes unauthenticated endpoints that overwrite the served weights, so the server binds to loopback
unless told otherwise, and refuses addresses other machines could reach without --allow-public-bind.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence

from trlstack.addresses import host_addresses, resolved
from trlstack.command import Command, exec_command
from trlstack.defaults import LOOPBACK, VLLM_ENV, Env
from trlstack.errors import UsageError, run_main
from trlstack.gpus import PCI_BUS_ID, Gpu, nccl_host_id, visible_gpus
from trlstack.models import check_local_path, read_config
from trlstack.plan.rules import ROLES, Layout, Sizes, attention_heads, check_layout
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
    """Refuse binds others could reach unless `allow_public`: dev mode lets any client replace weights."""
    if allow_public:
        return
    try:
        addresses = host_addresses(host, resolve)
    except OSError as error:
        raise UsageError(
            f"--host {host!r} does not resolve ({error.strerror or error}); give an IP address such as "
            f"{LOOPBACK}."
        ) from None
    exposed = [a for a in addresses if a.is_unspecified or not (a.is_loopback or a.is_private)]
    if exposed:
        what = (
            "every interface"
            if any(a.is_unspecified for a in exposed)
            else f"the public address {exposed[0]}"
        )
        raise UsageError(
            f"--host {host} binds the server on {what}, and the VLLM_SERVER_DEV_MODE endpoints "
            "(weight updates) have no authentication. Bind 127.0.0.1 or a private network address "
            f"(e.g. the compose service name), or pass --allow-public-bind ({Env.ALLOW_PUBLIC_BIND}=1) "
            "only where a firewall or an unpublished container network keeps others out."
        )


NO_GPU = (
    "serve-vllm needs a CUDA GPU and none is visible. Run it on a machine with an NVIDIA GPU and driver, "
    "give the container GPUs (docker --gpus, or compose device reservations), check CUDA_VISIBLE_DEVICES, "
    "preview the command for a machine of N GPUs with --print-command --gpus N, or try `train RECIPE --cpu` "
    "for a smoke run without vLLM."
)


def given(environ: Mapping[str, str], preview: int | None) -> str:
    """Where serve-vllm's GPUs come from, in words, for its messages."""
    if preview is not None:
        return f"--gpus {preview}"
    chosen = environ.get(Env.CUDA_VISIBLE_DEVICES)
    return f"{Env.CUDA_VISIBLE_DEVICES}={chosen}" if chosen else "this machine"


def parallel_sizes(
    settings: ServeSettings, gpus: Sequence[Gpu], heads: int | None = None, where: str = "this machine"
) -> Sizes:
    """vLLM's layout over the visible GPUs, by the plan's rules (plan/rules.py): tensor- x data-parallel over
    exactly those GPUs, by default one replica per GPU, the tensor-parallel size dividing the model's `heads`
    (None: unknown); the memory share as the plan decides it. `where`: where the GPUs come from, in words."""
    layout = Layout(
        serve=tuple(gpu.index for gpu in gpus),
        tensor_parallel_size=settings.tensor_parallel_size,
        data_parallel_size=settings.data_parallel_size,
        share_gpus=settings.share_gpus,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        port=settings.port,
        num_heads=heads,
    )
    return check_layout(layout, ROLES, where)


def build_command(
    settings: ServeSettings, gpus: Sequence[Gpu], heads: int | None = None, where: str = "this machine"
) -> Command:
    """The vLLM server command for the visible `gpus` (`heads`: the model's attention heads, None where its
    config.json is not readable here; `where`: where the GPUs come from, in words); raises UsageError naming
    the fix for bad settings."""
    check_passthrough(settings.extra, receiver(VLLM), TAKEN, "serve-vllm")
    if not gpus:
        raise UsageError(NO_GPU)
    sizes = parallel_sizes(settings, gpus, heads, where)
    argv = ["vllm", "serve", settings.model, *TRL_SERVER_FLAGS]
    argv += ["--host", settings.host, "--port", str(settings.port)]
    argv += ["--tensor-parallel-size", str(sizes.tensor_parallel_size)]
    argv += ["--data-parallel-size", str(sizes.data_parallel_size)]
    argv += ["--gpu-memory-utilization", str(sizes.gpu_memory_utilization)]
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
        check_local_path(settings.model, f"--model ({Env.MODEL})")
        gpus = visible_gpus(environ) if args.gpus is None else [Gpu(index) for index in range(args.gpus)]
        heads = attention_heads(read_config(settings.model, environ))
        command = build_command(settings, gpus, heads, given(environ, args.gpus))
        if args.print_command:
            print(command.shell())
            return 0
        exec_command(command, environ)
        return 0  # not reached: exec replaced this process

    return run_main("serve-vllm", body)
