"""How this run's weights reach the vLLM server (transfer.py's rule), decided before launch: what train hands
every rank (TRLSTACK_WEIGHT_TRANSFER, which rank/run.py acts on through rank/ipc_push.py) and says."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from trlstack.addresses import is_loopback
from trlstack.defaults import LOOPBACK, Env
from trlstack.errors import UsageError
from trlstack.run.settings import TrainSettings
from trlstack.transfer import AUTO, FLAG, IPC, backend_mismatch, check, describe, resolve


def chosen(settings: TrainSettings) -> str | None:
    """The transport of this run (None: no server to push to, with --vllm-mode colocate or --cpu);
    UsageError for one that cannot reach the server."""
    if settings.mode != "server":
        if settings.weight_transfer != AUTO:
            raise UsageError(
                f"{FLAG} {settings.weight_transfer} ({Env.WEIGHT_TRANSFER}) sets how weights reach a vLLM "
                f"server, and this run has none ({'--cpu' if settings.cpu else '--vllm-mode colocate'}: "
                f"{'no vLLM' if settings.cpu else 'vLLM inside the trainer'}); drop it."
            )
        return None
    transfer = resolve(settings.weight_transfer, settings.share_gpus, settings.num_machines)
    check(transfer, settings.share_gpus, settings.num_machines)
    host = urllib.parse.urlsplit(settings.server_url).hostname or ""
    if transfer == IPC and not is_loopback(host):
        raise UsageError(
            f"--vllm-url {settings.server_url}: with {FLAG} ipc the server binds loopback only (it unpickles "
            f"what reaches /update_weights) and shares this host's GPUs; point --vllm-url at "
            f"http://{LOOPBACK}:PORT, or use {FLAG} nccl for a server elsewhere."
        )
    return transfer


def weight_transfer(settings: TrainSettings) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(config keys, the ranks' environment, notes) for how the weights reach the server; none for a run
    without one. UsageError naming the fix where the transport cannot reach it."""
    transfer = chosen(settings)
    if transfer is None:
        return {}, {}, []
    how = "chosen" if settings.weight_transfer != AUTO else "auto"
    note = f"weight transfer {transfer} ({FLAG} {how}): {describe(transfer, settings.share_gpus)}"
    return {}, {Env.WEIGHT_TRANSFER: transfer}, [note]


def check_server(vllm_config: Mapping[str, Any], transfer: str | None, url: str) -> None:
    """UsageError, before anything starts, where the server's engine (its /server_info vllm_config) is not
    the one this run pushes through (`chosen`); nothing to check without a transport."""
    if transfer is None:
        return
    config = vllm_config.get("weight_transfer_config")
    backend = config.get("backend") if isinstance(config, Mapping) else None
    problem = backend_mismatch(backend, transfer, url)
    if problem is not None:
        raise UsageError(problem[0].upper() + problem[1:] + ".")
