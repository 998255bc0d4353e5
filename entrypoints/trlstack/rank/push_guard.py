"""Every weight push to vLLM bounded in time, in every training rank: a stuck gather or broadcast ends the run
with a line naming the rank and what it is stuck in, never a silent hang.

GRPO and RLOO push through TRL's `VLLMGeneration.sync_weights`, Online DPO through its trainer's
`_move_model_to_vllm`. Each push is a collective of every rank: under FSDP2 each rank gathers every parameter
in turn (`full_tensor()`, an all-gather); in server mode the first rank streams them to the server
(`VLLMClient.update_named_params`: HTTP requests and an NCCL broadcast into vLLM's workers), in colocate each
rank loads them into its own engine. A rank that never reaches the push, or a server that stops taking part,
holds every other rank until NCCL's own watchdog (TrainingArguments.ddp_timeout, 30 minutes), whose message
names a collective's sequence number, not the push.

Here each push arms a deadline in its rank, and the rank notes where the push is by wrapping TRL's methods
rather than copying them: the one that names a parameter for vLLM (called just before it is gathered), the
one that walks the parameters (each yielded once gathered, to be sent or loaded) and the client's send; one
tuple stored per parameter, nothing more, on the hot path. A push ends by waiting for this GPU to finish the
collectives it queued (the CPU may run ahead of them), so that a hang shows inside the bound, not at the next
step. A thread checks the deadline; past it, the rank prints one line and ends with os._exit, as Python cannot
unwind a thread held in a collective; torch elastic then ends the other ranks, each of which prints its own
line if it was pushing. Checkpoints are kept: the run resumes from the last.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trlstack.defaults import Env
from trlstack.option_types import handed_number
from trlstack.rank.push_phases import (
    COLOCATED,
    GATHERING,
    HANDED,
    HELPER,
    JOINING,
    SENDER,
    SENDING,
    SENT,
    SETTLING,
    STARTING,
    WALKED,
    describe,
    role,
)
from trlstack.transfer import IPC, NCCL

EXIT_CODE = 1
POLL_S = 1.0  # how often the deadline is checked (a quarter of a shorter bound)
ONLINE_DPO_SCRIPT = "trlstack.rank.online_dpo"  # the recipe that pushes through OnlineDPOTrainer


@dataclass(frozen=True)
class Pusher:
    """A TRL class that pushes weights: its module and name, the method that pushes, the attribute holding
    its vLLM mode, the methods that walk the parameters (yielding each gathered) and that name each one."""

    module: str
    name: str
    push: str
    mode: str
    walks: tuple[str, ...] = ()
    names: tuple[str, ...] = ()


GENERATION = Pusher(
    "trl.generation.vllm_generation",
    "VLLMGeneration",
    push="sync_weights",
    mode="mode",
    walks=("_iter_named_params",),
    names=("_fix_param_name_to_vllm",),
)
# Online DPO gathers and sends inline, per parameter, calling the client's send once for each; colocated, its
# load into the engine follows each gather with no method of its own to wrap, so it reads as the gather.
ONLINE_DPO = Pusher(
    "trl.experimental.online_dpo",
    "OnlineDPOTrainer",
    push="_move_model_to_vllm",
    mode="vllm_mode",
    names=("_fix_param_name_to_vllm",),
)
CLIENT = ("trl.generation.vllm_client", "VLLMClient", "update_named_params")
# The client's method that joins the server's weight-transfer group, once, as the trainer is made; bounded
# like a push: a server still inside a push whose trainer ended waits there, and would hold the next for ever.
JOIN = "init_communicator"
# Through CUDA IPC: the first rank's HTTP steps (ipc_push.Server) and Online DPO's walk (ipc_push's own).
IPC_PUSH = "trlstack.rank.ipc_push"
IPC_STEPS = ("Server", "start", "load")
IPC_WALK = "online_dpo_params"


@dataclass
class Watch:
    """This rank's push: its bound, since when the push in progress runs (None: none), this rank's part in
    it and where it is."""

    timeout_s: float
    rank: str
    transport: str = NCCL
    since: float | None = None
    role: str = HELPER
    phase: tuple[str, str] = (STARTING, "")


def bound_from(environ: Mapping[str, str]) -> float | None:
    """The bound train gives every rank (None: no guard); SystemExit naming the variable for a bad value."""
    return handed_number(environ, Env.WEIGHT_PUSH_TIMEOUT, "a number of seconds", "--weight-push-timeout")


def stuck_message(watch: Watch, now: float) -> str | None:
    """The line a rank prints when its push has run past the bound (None: it has not)."""
    since = watch.since
    if since is None or now - since <= watch.timeout_s:
        return None
    kind, name = watch.phase
    others = "a rank that stopped taking part (one that prints no such line never reached the push)"
    if watch.role != COLOCATED:
        others += ", or a vLLM server that stopped (check its log),"
    return (
        f"rank {watch.rank}: the weight push to vLLM has not finished in {watch.timeout_s:g} s "
        f"(--weight-push-timeout); stuck while {describe(kind, name, watch.role, watch.transport)}: "
        f"{others} holds the others; the run ends (checkpoints are kept; run again to resume, with a larger "
        "--weight-push-timeout if this model's pushes are merely slow)"
    )


def timed_push(
    push: Callable[..., Any],
    watch: Watch,
    part_of: Callable[[Any], str],
    settle: Callable[[], None],
    start: str = STARTING,
) -> Callable[..., Any]:
    """Wrap a method that pushes: the deadline armed while it runs, the GPU settled before it is disarmed."""

    @functools.wraps(push)
    def push_in_time(owner: Any, *args: Any, **kwargs: Any) -> Any:
        if watch.since is not None:  # within a push already (sync_weights called from generate)
            return push(owner, *args, **kwargs)
        watch.role = part_of(owner)
        watch.phase = (start, "")
        watch.since = time.monotonic()
        try:
            result = push(owner, *args, **kwargs)
            watch.phase = (SETTLING, watch.phase[1])
            settle()
            return result
        finally:
            watch.since = None

    return push_in_time


def noting_names(name_for_vllm: Callable[..., str], watch: Watch) -> Callable[..., str]:
    """Wrap the method that names a parameter for vLLM, which TRL calls just before gathering it."""

    @functools.wraps(name_for_vllm)
    def name_and_note(*args: Any, **kwargs: Any) -> str:
        name = name_for_vllm(*args, **kwargs)
        watch.phase = (GATHERING, name)
        return name

    return name_and_note


def noting_walk(walk: Callable[..., Iterator[Any]], watch: Watch) -> Callable[..., Iterator[Any]]:
    """Wrap a generator of (name, gathered tensor): each handed on is noted, then the walk's end."""

    @functools.wraps(walk)
    def walk_and_note(*args: Any, **kwargs: Any) -> Iterator[Any]:
        items = walk(*args, **kwargs)
        name = ""
        try:
            for item in items:
                name = item[0]
                watch.phase = (HANDED, name)
                yield item
        finally:
            close = getattr(items, "close", None)
            if close is not None:  # a consumer that stops early ends TRL's walk (and its gathers) now
                close()
        watch.phase = (WALKED, name)

    return walk_and_note


def noting_sends(send: Callable[..., Any], watch: Watch) -> Callable[..., Any]:
    """Wrap the client's update_named_params(metadata, named_params): the send, then its end, noted."""

    @functools.wraps(send)
    def send_and_note(client: Any, metadata: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        watch.phase = (SENDING, metadata[0][0] if len(metadata) == 1 else "")
        result = send(client, metadata, *args, **kwargs)
        watch.phase = (SENT, metadata[-1][0] if metadata else "")
        return result

    return send_and_note


def noting_loads(load: Callable[..., Any], watch: Watch) -> Callable[..., Any]:
    """Wrap ipc_push.Server.load(update): the server loading the update, then its answer, noted."""

    @functools.wraps(load)
    def load_and_note(server: Any, update: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        names = update.get("names") or [""]
        watch.phase = (SENDING, names[-1])
        result = load(server, update, *args, **kwargs)
        watch.phase = (SENT, names[-1])
        return result

    return load_and_note


def noting_start(start: Callable[..., Any], watch: Watch) -> Callable[..., Any]:
    """Wrap ipc_push.Server.start: the update being started on the server, noted."""

    @functools.wraps(start)
    def start_and_note(*args: Any, **kwargs: Any) -> Any:
        watch.phase = (SENDING, "")
        return start(*args, **kwargs)

    return start_and_note


def guard_ipc(watch: Watch, ipc_push: Any) -> None:
    """Wrap the CUDA-IPC push's steps (rank/ipc_push.py, the module given) in place."""
    server = getattr(ipc_push, IPC_STEPS[0])
    server.start = noting_start(server.start, watch)
    server.load = noting_loads(server.load, watch)
    setattr(ipc_push, IPC_WALK, noting_walk(getattr(ipc_push, IPC_WALK), watch))


def guard(watch: Watch, pushers: Mapping[Pusher, Any], client: Any, settle: Callable[[], None]) -> None:
    """Wrap the pushers' classes (each Pusher's class object given) and the client's class in place."""
    for pusher, cls in pushers.items():

        def part_of(owner: Any, mode: str = pusher.mode) -> str:
            accelerator = getattr(owner, "accelerator", None)
            return role(getattr(owner, mode, None), bool(getattr(accelerator, "is_main_process", True)))

        setattr(cls, pusher.push, timed_push(getattr(cls, pusher.push), watch, part_of, settle))
        for name in pusher.walks:
            setattr(cls, name, noting_walk(getattr(cls, name), watch))
        for name in pusher.names:
            setattr(cls, name, noting_names(getattr(cls, name), watch))
    method = CLIENT[2]
    setattr(client, method, noting_sends(getattr(client, method), watch))
    setattr(client, JOIN, timed_push(getattr(client, JOIN), watch, lambda _: SENDER, lambda: None, JOINING))


def settle_gpu() -> None:
    """Wait for this rank's GPU to finish what the push queued: the CPU may queue every all-gather and return
    before one completes, and a hang would then show at the next step, outside the bound."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def watchdog(
    watch: Watch,
    end: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Check the deadline every POLL_S; `end` the run with the stuck line once it has passed."""
    poll = min(POLL_S, watch.timeout_s / 4)
    while True:
        sleep(poll)
        message = stuck_message(watch, clock())
        if message is not None:
            end(message)
            return


def end_process(message: str) -> None:
    print(f"train: {message}", file=sys.stderr, flush=True)
    os._exit(EXIT_CODE)


def install(say: Callable[[str], None], script: str, environ: Mapping[str, str]) -> Watch | None:
    """Guard this rank's pushes to vLLM when train bounds them (imports TRL's generation modules)."""
    import importlib

    timeout_s = bound_from(environ)
    if timeout_s is None:
        return None
    transport = IPC if environ.get(Env.WEIGHT_TRANSFER) == IPC else NCCL
    watch = Watch(timeout_s, rank=environ.get("RANK", "0"), transport=transport)
    pushers = [GENERATION, *([ONLINE_DPO] if script == ONLINE_DPO_SCRIPT else [])]
    classes = {pusher: getattr(importlib.import_module(pusher.module), pusher.name) for pusher in pushers}
    client = getattr(importlib.import_module(CLIENT[0]), CLIENT[1])
    guard(watch, classes, client, settle_gpu)
    if transport == IPC:
        guard_ipc(watch, importlib.import_module(IPC_PUSH))
    thread = threading.Thread(target=watchdog, args=(watch, end_process), name="trlstack-push-guard")
    thread.daemon = True  # it never holds the process open
    thread.start()
    say(
        f"each weight push to vLLM must finish within {timeout_s:g} s ({Env.WEIGHT_PUSH_TIMEOUT}), else the "
        "run ends, every rank naming what it is stuck in"
    )
    return watch
