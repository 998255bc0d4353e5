"""How the trainer's weights reach the vLLM server after each step, declared once for serve-vllm, train and
`trlstack plan`, and the one rule that picks it.

- `nccl`: vLLM's NCCL weight-transfer engine, TRL's own client: the trainer joins the server's workers in a
  process group and broadcasts each parameter. It reaches any GPU of any host; where the two roles share a GPU
  NCCL refuses two ranks on one GPU of one host, so each role names itself a host of its own and the weights
  go over NCCL's sockets (4.4-4.8 GB/s measured on one H100), not GPU memory.
- `ipc`: vLLM's CUDA-IPC weight-transfer engine: the trainer hands the server CUDA-IPC handles to its own GPU
  tensors (HTTP /update_weights), matched by the GPU's UUID, and the server copies them from GPU memory. Only
  where the trainer's ranks run on the server's GPUs, on the server's host. The server unpickles what reaches
  /update_weights (vLLM's HTTP transport pickles the handles), so it listens on loopback only.
- `auto` (the default): ipc where the roles share their GPUs on one host (--share-gpus on one machine), else
  nccl.
"""

from __future__ import annotations

import json
from typing import Any

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.option_types import one_of
from trlstack.options import setting

AUTO, NCCL, IPC = "auto", "nccl", "ipc"
CHOICES = (AUTO, NCCL, IPC)
FLAG = "--weight-transfer"

# The server's engine as vLLM's --weight-transfer-config names it: for IPC trlstack's (vllm_engine.py: vLLM's
# own, loading an unquantized model's weights in place), which vllm_plugin.py registers.
BACKENDS = {NCCL: "nccl", IPC: "trlstack-ipc"}
BACKEND_CONFIG = {transfer: json.dumps({"backend": backend}) for transfer, backend in BACKENDS.items()}
# Engines a trainer's transport also works with: vLLM's own IPC engine, as a plain `vllm serve` starts it.
ALSO_TAKES = {IPC: ("ipc",)}


def weight_transfer_setting(group: str | None = None) -> Any:
    """The transport (serve-vllm, train and plan --weight-transfer), in train's --help `group`."""
    return setting(
        Env.WEIGHT_TRANSFER,
        "how the trainer's weights reach the vLLM server: ipc (CUDA IPC from the trainer's GPU memory; only "
        "where both run on the same GPUs of one host, --share-gpus; the server then binds loopback only), "
        "nccl (any GPUs, any hosts; over sockets where the GPUs are shared), or auto: ipc with --share-gpus "
        "on one machine, else nccl",
        AUTO,
        one_of(*CHOICES),
        group=group,
    )


def resolve(asked: str, share_gpus: bool, machines: int = 1) -> str:
    """The transport a role uses: `asked`, or for auto, ipc where the roles share their GPUs on one host."""
    if asked != AUTO:
        return asked
    return IPC if share_gpus and machines == 1 else NCCL


def check(chosen: str, share_gpus: bool, machines: int = 1) -> None:
    """Refuse ipc where the trainer's tensors are not on the server's GPUs of the server's host: vLLM would
    fail at the first push, finding no handle for its GPU's UUID."""
    if chosen != IPC:
        return
    if not share_gpus:
        raise UsageError(
            f"{FLAG} ipc ({Env.WEIGHT_TRANSFER}) hands the server CUDA-IPC handles to the trainer's own GPU "
            "memory, so the server and the trainer must run on the same GPUs: add --share-gpus "
            f"({Env.SHARE_GPUS}=1), or use {FLAG} nccl for disjoint GPUs."
        )
    if machines > 1:
        raise UsageError(
            f"{FLAG} ipc ({Env.WEIGHT_TRANSFER}) reaches only the server's own host, and this run trains on "
            f"{machines} machines; use {FLAG} nccl (or auto) across hosts."
        )


def check_without_server(asked: str, layout: str) -> None:
    """Refuse a transport asked for where `layout` (in words) runs no server: the weights go nowhere."""
    if asked != AUTO:
        raise UsageError(
            f"{FLAG} {asked} ({Env.WEIGHT_TRANSFER}) sets how weights reach a vLLM server, and {layout} runs "
            "none (vLLM inside the trainer, colocate); add --share-gpus to plan a server beside the trainer, "
            "or drop it."
        )


def describe(chosen: str, share_gpus: bool) -> str:
    """The transport in words, for the plan's layout line and train's notes."""
    if chosen == IPC:
        return (
            "weights are pushed through CUDA IPC: the trainer hands the server handles to its own GPU memory "
            "(HTTP on loopback), the server copies them at memory speed"
        )
    if share_gpus:
        return "weights are pushed over NCCL sockets, not P2P/NVLink"
    return "weights are pushed over NCCL (P2P/NVLink where the GPUs have it)"


def backend_mismatch(backend: str | None, transfer: str, url: str) -> str | None:
    """Why a server whose weight-transfer engine is `backend` (None: none) cannot take this trainer's
    `transfer`, naming the fix; None when it can."""
    if backend == BACKENDS[transfer] or backend in ALSO_TAKES.get(transfer, ()):
        return None
    started = f"started with the {backend} weight-transfer engine" if backend else "started with none"
    other = NCCL if transfer == IPC else IPC
    return (
        f"the vLLM server at {url} was {started}, and this trainer pushes its weights through {transfer} "
        f"({FLAG}, {Env.WEIGHT_TRANSFER}): give serve-vllm and train the same {FLAG} (auto picks ipc for "
        f"both with --share-gpus), or train with {FLAG} {other}"
    )
