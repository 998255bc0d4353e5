"""`serve-vllm`: TRL's vLLM generation server, started exactly as TRL's guide says, on the GPUs it is given.

    VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config '{"backend": "nccl"}'
        --logprobs-mode processed_logprobs --max-logprobs -1 --host H --port P ...

Dev mode exposes unauthenticated endpoints that overwrite the served weights, so the server binds to loopback
unless told otherwise, and refuses addresses other machines could reach without --allow-public-bind.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from trlstack.command import Command, exec_command
from trlstack.errors import UsageError, run_main
from trlstack.gpus import Gpu, visible_gpus
from trlstack.options import (
    Parser,
    add_preview,
    add_setting,
    add_switch,
    check_preview,
    port_number,
    positive_float,
    positive_int,
    split_extra,
)

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

# The flags TRL's guide starts the server with: weight sync over NCCL and the log-probabilities TRL reads.
TRL_SERVER_FLAGS = (
    "--weight-transfer-config",
    '{"backend": "nccl"}',
    "--logprobs-mode",
    "processed_logprobs",
    "--max-logprobs",
    "-1",
)


@dataclass(frozen=True)
class ServeSettings:
    model: str = DEFAULT_MODEL
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    tensor_parallel_size: int | None = None
    data_parallel_size: int | None = None
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    dtype: str = "auto"
    allow_public_bind: bool = False
    extra: list[str] = field(default_factory=list)


def resolve_host(host: str) -> list[str]:
    """The addresses a host name stands for (a side effect: DNS or /etc/hosts)."""
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(host, None)})
    except socket.gaierror as error:
        raise UsageError(
            f"--host {host!r} does not resolve ({error.strerror}); give an IP address such as 127.0.0.1."
        ) from None


def check_bind(host: str, allow_public: bool, resolve: Callable[[str], list[str]] = resolve_host) -> None:
    """Refuse binds others could reach unless `allow_public`: dev mode lets any client replace weights."""
    if allow_public:
        return
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        addresses = [ipaddress.ip_address(address.split("%")[0]) for address in resolve(host)]
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
            "(e.g. the compose service name), or pass --allow-public-bind (TRLSTACK_ALLOW_PUBLIC_BIND=1) "
            "only where a firewall or an unpublished container network keeps others out."
        )


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


# vLLM flags serve-vllm sets itself; given again after `--` they would silently win (the last one counts).
OWN_FLAGS = {
    "--host": "--host",
    "--port": "--port",
    "--tensor-parallel-size": "--tensor-parallel-size",
    "-tp": "--tensor-parallel-size",
    "--data-parallel-size": "--data-parallel-size",
    "-dp": "--data-parallel-size",
    "--gpu-memory-utilization": "--gpu-memory-utilization",
    "--max-model-len": "--max-model-len",
    "--dtype": "--dtype",
    "--weight-transfer-config": None,
    "--logprobs-mode": None,
    "--max-logprobs": None,
}


def check_extra(extra: Sequence[str]) -> None:
    """Refuse pass-through arguments that override what serve-vllm decides (the bind check above all)."""
    for word in extra:
        flag = word.split("=", 1)[0]
        if flag in OWN_FLAGS:
            own = OWN_FLAGS[flag]
            fix = (
                f"use serve-vllm's own {own} (before `--`)" if own else "TRL needs the value serve-vllm sets"
            )
            raise UsageError(f"{flag} after `--` would override serve-vllm's setting; {fix}.")


def build_command(settings: ServeSettings, gpus: Sequence[Gpu]) -> Command:
    """The vLLM server command for the visible `gpus`; raises UsageError naming the fix for bad settings."""
    check_extra(settings.extra)
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
    argv += ["--gpu-memory-utilization", str(settings.gpu_memory_utilization)]
    if settings.max_model_len is not None:
        argv += ["--max-model-len", str(settings.max_model_len)]
    if settings.dtype != "auto":
        argv += ["--dtype", settings.dtype]
    return Command(argv=argv + list(settings.extra), env={"VLLM_SERVER_DEV_MODE": "1"})


def memory_fraction(raw: str) -> float:
    value = positive_float(raw)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{value} is not a fraction in (0, 1]")
    return value


DTYPES = ("auto", "bfloat16", "float16", "half", "float", "float32")


def dtype_name(raw: str) -> str:
    if raw not in DTYPES:
        raise argparse.ArgumentTypeError(f"{raw!r} is not one of {', '.join(DTYPES)}")
    return raw


def make_parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = Parser(
        prog="serve-vllm",
        description="Start TRL's vLLM generation server (dev-mode weight transfer over NCCL) on the "
        "visible GPUs. Arguments after `--` go to `vllm serve` unchanged.",
    )
    add_setting(
        parser,
        "--model",
        "TRLSTACK_MODEL",
        "model to serve (Hub id or local path)",
        DEFAULT_MODEL,
        environ=environ,
    )
    add_setting(parser, "--host", "TRLSTACK_VLLM_HOST", "address to bind", DEFAULT_HOST, environ=environ)
    add_setting(
        parser, "--port", "TRLSTACK_VLLM_PORT", "HTTP port", DEFAULT_PORT, port_number, environ=environ
    )
    add_setting(
        parser,
        "--tensor-parallel-size",
        "TRLSTACK_TENSOR_PARALLEL_SIZE",
        "GPUs per vLLM replica (default 1)",
        None,
        positive_int,
        environ=environ,
    )
    add_setting(
        parser,
        "--data-parallel-size",
        "TRLSTACK_DATA_PARALLEL_SIZE",
        "vLLM replicas (default: visible GPUs / tensor-parallel size)",
        None,
        positive_int,
        environ=environ,
    )
    add_setting(
        parser,
        "--gpu-memory-utilization",
        "TRLSTACK_GPU_MEMORY_UTILIZATION",
        "fraction of each GPU's memory vLLM may take",
        0.9,
        memory_fraction,
        environ=environ,
    )
    add_setting(
        parser,
        "--max-model-len",
        "TRLSTACK_MAX_MODEL_LEN",
        "longest prompt + completion in tokens",
        None,
        positive_int,
        environ=environ,
    )
    add_setting(
        parser,
        "--dtype",
        "TRLSTACK_DTYPE",
        "weight and activation dtype",
        "auto",
        dtype_name,
        environ=environ,
    )
    add_switch(
        parser,
        "--allow-public-bind",
        "TRLSTACK_ALLOW_PUBLIC_BIND",
        "allow binding 0.0.0.0 or a public address (the dev-mode endpoints are unauthenticated)",
        environ=environ,
    )
    add_preview(parser, "the command and its environment")
    return parser


def parse_settings(
    argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[ServeSettings, argparse.Namespace]:
    own, extra = split_extra(argv)
    args = make_parser(environ).parse_args(own)
    settings = ServeSettings(
        model=args.model,
        host=args.host,
        port=args.port,
        tensor_parallel_size=args.tensor_parallel_size,
        data_parallel_size=args.data_parallel_size,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        dtype=args.dtype,
        allow_public_bind=args.allow_public_bind,
        extra=extra,
    )
    check_preview(args, "the GPUs the server runs on")
    return settings, args


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        environ = os.environ
        settings, args = parse_settings(sys.argv[1:] if argv is None else argv, environ)
        check_bind(settings.host, settings.allow_public_bind)
        gpus = visible_gpus(environ) if args.gpus is None else [Gpu(index) for index in range(args.gpus)]
        command = build_command(settings, gpus)
        if args.print_command:
            print(command.shell())
            return 0
        exec_command(command, environ)
        return 0  # not reached: exec replaced this process

    return run_main("serve-vllm", body)
