"""`serve-vllm`: TRL's vLLM generation server, started exactly as TRL's guide says, on the GPUs it is given.

    VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config '{"backend": "nccl"}'
        --logprobs-mode processed_logprobs --max-logprobs -1 --host H --port P ...

Dev mode exposes unauthenticated endpoints that overwrite the served weights, so the server binds to loopback
unless told otherwise, and refuses addresses other machines could reach without --allow-public-bind.

Where the trainer shares the server's GPUs (--share-gpus), the weights come through trlstack's CUDA-IPC engine
instead (transfer.py: `{"backend": "trlstack-ipc"}`; vllm_engine.py): the trainer posts CUDA-IPC handles to
/update_weights, pickled, which vLLM unpickles only with VLLM_ALLOW_INSECURE_SERIALIZATION=1. Unpickling runs
whatever a request holds, so that server binds loopback only, always: no flag opens it to other addresses.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from trlstack import addresses
from trlstack.addresses import resolved
from trlstack.command import Command, exec_command
from trlstack.defaults import DEFAULT_MODEL, LOOPBACK, VLLM_ENV, Env
from trlstack.errors import UsageError, run_main
from trlstack.gpus import PCI_BUS_ID, Gpu, nccl_host_id, visible_gpus
from trlstack.models import check_local_path, read_config
from trlstack.plan.rules import ROLES, Layout, Sizes, attention_heads, check_layout
from trlstack.roles.command_line import Role, parse_role
from trlstack.roles.serve.settings import TAKEN, ServeSettings
from trlstack.run.passthrough import VLLM, check_passthrough, receiver
from trlstack.run.task import task_model
from trlstack.transfer import BACKEND_CONFIG, IPC, NCCL, check, resolve

ROLE = Role(
    "serve-vllm",
    "Start TRL's vLLM generation server (dev-mode weight transfer over NCCL, or CUDA IPC where the trainer "
    "shares its GPUs) on the visible GPUs. Arguments after `--` go to `vllm serve` unchanged.",
    prints="the command and its environment",
    chooses="the GPUs the server runs on",
)

# The flags TRL's guide starts the server with: the log-probabilities TRL reads, after the weight-transfer
# engine (server_flags).
TRL_SERVER_FLAGS = ("--logprobs-mode", "processed_logprobs", "--max-logprobs", "-1")


def server_flags(transfer: str) -> list[str]:
    """vLLM's flags for TRL: the weight-transfer engine (`transfer`: nccl or ipc), then TRL_SERVER_FLAGS."""
    return ["--weight-transfer-config", BACKEND_CONFIG[transfer], *TRL_SERVER_FLAGS]


def check_ipc_bind(host: str, resolve: Callable[[str], list[str]] = resolved) -> None:
    """Refuse any bind but loopback for the CUDA-IPC server, whatever else is allowed: it unpickles what
    reaches /update_weights, and a pickle runs code."""
    try:
        found = addresses.host_addresses(host, resolve)
    except OSError:
        found = []
    outside = [a for a in found if not a.is_loopback]
    if found and not outside:
        return
    if not found:
        reached = "does not resolve to a loopback address"
    elif any(a.is_unspecified for a in outside):
        reached = "binds every interface"
    else:
        reached = f"binds {outside[0]}, which is not loopback"
    raise UsageError(
        f"--host {host} {reached}: with --weight-transfer ipc the server unpickles what reaches its "
        "/update_weights endpoint (vLLM's HTTP transport pickles the CUDA-IPC handles, and unpickling runs "
        f"code), so it binds loopback only, even with --allow-public-bind; bind {LOOPBACK} (the trainer "
        "shares this host), or use --weight-transfer nccl."
    )


def check_bind(
    host: str, allow_public: bool, resolve: Callable[[str], list[str]] = resolved, transfer: str = NCCL
) -> None:
    """Refuse binds others could reach unless `allow_public`: dev mode lets any client replace weights. With
    `transfer` ipc, anything but loopback (check_ipc_bind)."""
    if transfer == IPC:
        check_ipc_bind(host, resolve)
        return

    def refusal(what: str) -> str:
        return (
            f"--host {host} binds the server on {what}, and the VLLM_SERVER_DEV_MODE endpoints "
            "(weight updates) have no authentication. Bind 127.0.0.1 or a private network address "
            f"(e.g. the compose service name), or pass --allow-public-bind ({Env.ALLOW_PUBLIC_BIND}=1) "
            "only where a firewall or an unpublished container network keeps others out."
        )

    addresses.check_bind(host, allow_public, refusal, private_ok=True, resolve=resolve)


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
    transfer = chosen_transfer(settings)
    argv = ["vllm", "serve", settings.model or DEFAULT_MODEL, *server_flags(transfer)]
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
        # vLLM's HTTP transport pickles the CUDA-IPC handles; this server binds loopback only (check_bind).
        **({Env.VLLM_ALLOW_INSECURE_SERIALIZATION: "1"} if transfer == IPC else {}),
        # NCCL's weight group across two roles on one GPU needs two hosts; CUDA IPC has no such group.
        **(nccl_host_id("serve") if settings.share_gpus and transfer == NCCL else {}),
    }
    return Command(argv=argv + list(settings.extra), env=env)


def chosen_transfer(settings: ServeSettings) -> str:
    """The weight transfer this server takes (transfer.resolve); UsageError for ipc on GPUs not shared."""
    transfer = resolve(settings.weight_transfer, settings.share_gpus)
    check(transfer, settings.share_gpus)
    return transfer


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        environ = os.environ
        settings, args = parse_role(ROLE, ServeSettings, sys.argv[1:] if argv is None else argv, environ)
        # the model asked for, else the task's (the same folder the trainer loads), else the default
        model = settings.model or (task_model(settings.task) if settings.task else None) or DEFAULT_MODEL
        settings = dataclasses.replace(settings, model=model)
        check_bind(settings.host, settings.allow_public_bind, transfer=chosen_transfer(settings))
        check_local_path(model, f"--model ({Env.MODEL})")
        gpus = visible_gpus(environ) if args.gpus is None else [Gpu(index) for index in range(args.gpus)]
        heads = attention_heads(read_config(model, environ))
        command = build_command(settings, gpus, heads, given(environ, args.gpus))
        if args.print_command:
            print(command.shell())
            return 0
        exec_command(command, environ)
        return 0  # not reached: exec replaced this process

    return run_main("serve-vllm", body)
