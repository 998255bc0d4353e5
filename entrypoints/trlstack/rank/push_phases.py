"""Where a weight push is, in words: the phases a rank notes as it pushes (rank/push_guard.py), each rank's
part in the push, and what a rank stuck in each phase is doing, over NCCL or through CUDA IPC, for the line
the push guard prints when the bound has passed."""

from __future__ import annotations

from typing import Any

from trlstack.transfer import IPC, NCCL

# Where a push is, as a rank notes it: (what it does, the parameter's name as vLLM knows it).
JOINING = "joining"  # server mode, the first rank, at start: joining the server's weight-transfer group
STARTING = "starting"
GATHERING = "gathering"  # the parameter named, its all-gather next
HANDED = "handed"  # the parameter gathered and handed on, to be sent or loaded
WALKED = "walked"  # every parameter gathered and handed on
SENDING = "sending"  # in the client's send (HTTP requests and the NCCL broadcast)
SENT = "sent"  # the client's send returned
SETTLING = "settling"  # waiting for this GPU to finish the collectives the push queued

# A rank's part in the push.
SENDER = "sender"  # server mode, the first rank: it streams the parameters to the server
HELPER = "helper"  # server mode, any other rank: it takes part in the gathers
COLOCATED = "colocated"  # colocate: each rank loads the parameters into its own engine


def role(mode: Any, main: bool) -> str:
    """A rank's part in the push, from its vLLM mode and whether it is the first rank."""
    if mode == "colocate":
        return COLOCATED
    return SENDER if main else HELPER


def describe(kind: str, name: str, part: str, transport: str = NCCL) -> str:
    """What a rank in `part` does at this point of the push, in words."""
    if kind == GATHERING:
        return f"gathering parameter {name} (FSDP all-gather)"
    if transport == IPC and part != COLOCATED:
        return describe_ipc(kind, name, part)
    if kind == HANDED:
        if part == SENDER:
            return f"sending the parameters up to {name} to the vLLM server (NCCL broadcast)"
        if part == COLOCATED:
            return f"loading parameter {name} into the colocated vLLM engine"
        return f"between parameters, after gathering {name}"
    if kind == WALKED:
        if part == SENDER:
            return (
                f"sending the last parameters, up to {name}, and waiting for the vLLM server to take them "
                "(NCCL broadcast, HTTP /update_weights)"
            )
        if part == COLOCATED:
            return f"resetting the colocated engine's prefix cache after loading the last parameter, {name}"
        return f"leaving the push after gathering the last parameter, {name}"
    if kind == SENDING:
        if name:
            return f"sending parameter {name} to the vLLM server (HTTP /update_weights, NCCL broadcast)"
        return "starting the update on the vLLM server (HTTP /start_weight_update)"
    if kind == SENT:
        return f"waiting for the vLLM server's answer after sending {name} (HTTP)"
    if kind == JOINING:
        return (
            "joining the vLLM server's weight-transfer group (HTTP /init_weight_transfer_engine, NCCL "
            "rendezvous); a server still inside a push whose trainer ended waits there until it is restarted"
        )
    if kind == SETTLING:
        queued = "FSDP all-gathers" + (", the NCCL broadcast" if part == SENDER else "")
        return f"waiting for this GPU to finish the push's queued collectives ({queued}; last named: {name})"
    return "starting the push, before the first parameter"


def describe_ipc(kind: str, name: str, part: str) -> str:
    """describe() where the weights go through CUDA IPC: every rank hands over handles to its own GPU
    memory (vLLM's sender all-gathers them across ranks), the first posts them, the server loads."""
    if kind == HANDED:
        return f"handing parameter {name} to the CUDA-IPC send (copied into the shared buffer)"
    if kind == WALKED:
        waits = "the vLLM server to load" if part == SENDER else "the first rank's send, whose server loads"
        return (
            f"exchanging CUDA-IPC handles with the other ranks and waiting for {waits} the last parameters, "
            f"up to {name} (all-gather, HTTP /update_weights, barrier)"
        )
    if kind == SENDING:
        if name:
            return (
                f"waiting for the vLLM server to load the parameters up to {name} from this GPU's memory "
                "(HTTP /update_weights, CUDA IPC)"
            )
        return "starting the update on the vLLM server (HTTP /start_weight_update)"
    if kind == SENT:
        return f"waiting for the other ranks after the server loaded the parameters up to {name} (barrier)"
    if kind == JOINING:
        return "asking the vLLM server for its CUDA-IPC engine (HTTP /init_weight_transfer_engine)"
    if kind == SETTLING:
        return f"waiting for this GPU to finish the push's queued work (FSDP all-gathers; last named: {name})"
    return "starting the push, before the first parameter"
