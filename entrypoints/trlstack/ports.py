"""The ports the roles talk over, vLLM's HTTP API, the NCCL group that moves weights into it and the
rendezvous where training machines meet, declared once for every command that takes them, and what a local
port is doing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trlstack.defaults import DEFAULT_GROUP_PORT, DEFAULT_MAIN_PROCESS_PORT, DEFAULT_VLLM_PORT, LOOPBACK, Env
from trlstack.option_types import port_number
from trlstack.options import setting


def http_port_setting() -> Any:
    """The vLLM server's HTTP port (serve-vllm --port, plan and doctor --port)."""
    return setting(Env.VLLM_PORT, "vLLM HTTP port", DEFAULT_VLLM_PORT, port_number)


def group_port_setting(group: str | None = None) -> Any:
    """The NCCL weight-transfer port (--group-port of train, plan, doctor and slurm), in train's --help
    `group`."""
    help = "port of the NCCL group that moves weights from the trainer to vLLM"
    return setting(Env.VLLM_GROUP_PORT, help, DEFAULT_GROUP_PORT, port_number, group=group)


def main_process_port_setting(group: str | None = None) -> Any:
    """The rendezvous port on the rank-0 training machine (train and trlstack slurm --main-process-port), in
    train's --help `group`."""
    help = "port on the rank-0 machine where the training machines meet (torch.distributed's rendezvous)"
    return setting(Env.MAIN_PROCESS_PORT, help, DEFAULT_MAIN_PROCESS_PORT, port_number, group=group)


@dataclass(frozen=True)
class Ports:
    """--port and --group-port, for `trlstack plan` and `trlstack doctor`."""

    port: int = http_port_setting()
    group_port: int = group_port_setting()


def port_problem(port: int) -> str | None:
    """Why a server could not listen on 127.0.0.1:port, or None when it could."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn and NCCL do
        try:
            sock.bind((LOOPBACK, port))
        except OSError as error:
            return error.strerror or str(error)
    return None


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the system picks it), for a server started next."""
    import socket

    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port
