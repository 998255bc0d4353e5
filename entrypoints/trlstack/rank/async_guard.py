"""async-grpo's hangs made bounded failures that name their cause.

TRL's AsyncGRPOTrainer waits on three things it does not own, on the first process (rank 0):

- the weight sync: HTTP requests to the server bounded by `weight_sync_timeout`, while the NCCL side runs on
  a thread that is joined without a timeout (weight_transfer.py: "NCCL has no timeout"), so a transfer the
  server gave up on can hold the trainer for ever after the request returned;
- the rollout worker, a spawned child: the trainer asks it for health only while the sample queue is empty
  (`check_health`), which raises when the child reported a failure or its heartbeat is older than
  `heartbeat_stale_after_s`, but a child killed from outside (the OOM killer, SIGKILL) reports nothing and is
  noticed only when its heartbeat goes stale, if ever: killed while putting a sample on the queue it can
  leave half a message there, whose rest the trainer's next read waits for (on the H200 a trainer whose
  child was killed said nothing for more than 120 s);
- the server: a dead server fails the worker's requests (after their retries), but a hung one holds each
  request for `request_timeout` (600 s) times three attempts.

Here, on rank 0: a dead child is reported at the next health check with its exit code; and a watchdog thread
asks the server's /health every few seconds and ends the process, naming the cause, when the server has not
answered for `server_lost_after_s`, a weight sync has run past `weight_sync_timeout` plus the time TRL's own
error needs to unwind, or the child has died without reporting an error (wherever the main thread waits).
Ending it is all a thread can do to a main thread held in NCCL or CUDA; torch elastic then ends the other
ranks. The run resumes from its last checkpoint.

And the child ignores the stop signals, which reach it with its parent's from a terminal (Ctrl-C) or a Slurm
step: the trainer saves a checkpoint on a stop signal (rank/run.py) and stops the child itself.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trlstack.defaults import Env

POLL_S = 5.0  # how often the watchdog asks the server's /health
HEALTH_REQUEST_S = 5.0  # how long one /health request may take
SYNC_UNWIND_S = 60.0  # past weight_sync_timeout: time for TRL's own timeout error to end the process first
EXIT_CODE = 1
HANGS = {  # what hangs in a weight sync past its bound, by transport
    "nccl": "the NCCL transfer hangs",
    "ipc": (
        "the CUDA-IPC transfer hangs (the server loading from the trainer's GPU memory, or a rank that "
        "never joined the handle exchange)"
    ),
}
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def say(message: str) -> None:
    print(f"train: async-grpo: {message}", file=sys.stderr, flush=True)


@dataclass
class Watch:
    """What the watchdog knows: since when the server answered, since when a weight sync runs (None: none),
    the rollout worker once started, and how its child died unreported (None: it lives, or reported)."""

    server_url: str
    server_lost_after_s: float
    weight_sync_timeout_s: float
    last_answer: float
    sync_since: float | None = None
    worker: Any = None
    worker_lost: str | None = None
    transport: str = "nccl"  # how the weights reach the server (TRLSTACK_WEIGHT_TRANSFER): nccl or ipc


def verdict(watch: Watch, now: float) -> str | None:
    """Why the run must end now (the cause and the setting that bounds it), or None."""
    if watch.worker_lost is not None:
        return watch.worker_lost
    silent = now - watch.last_answer
    if watch.server_lost_after_s > 0 and silent > watch.server_lost_after_s:
        return (
            f"the vLLM server at {watch.server_url} has not answered /health for {silent:.0f} s "
            f"(server_lost_after_s {watch.server_lost_after_s:g}): it died or hangs. Check its log, restart "
            "it, and run train again to resume from the last checkpoint."
        )
    if watch.sync_since is not None:
        running = now - watch.sync_since
        limit = watch.weight_sync_timeout_s + SYNC_UNWIND_S
        if running > limit:
            return (
                f"a weight sync to the vLLM server at {watch.server_url} has run {running:.0f} s, past "
                f"weight_sync_timeout {watch.weight_sync_timeout_s:g} s (+{SYNC_UNWIND_S:g} s for TRL's own "
                f"error): {HANGS.get(watch.transport, HANGS['nccl'])}. Check the server's log (an "
                "out-of-memory error while "
                "receiving, a lost worker), restart it, and run train again to resume."
            )
    return None


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=HEALTH_REQUEST_S) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def watchdog(watch: Watch, end: Callable[[str], None], ask: Callable[[str], bool] = answers) -> None:
    """Ask the server every POLL_S; `end` the run with the verdict's cause when there is one."""
    while True:
        if ask(watch.server_url):
            watch.last_answer = time.monotonic()
        watch.worker_lost = died_unreported(watch.worker)
        cause = verdict(watch, time.monotonic())
        if cause is not None:
            end(cause)
            return
        time.sleep(POLL_S)


def end_process(cause: str) -> None:
    say(f"ending the run: {cause}")
    os._exit(EXIT_CODE)


def start_watchdog(args: Any, server_lost_after_s: float) -> Watch:
    watch = Watch(
        server_url=args.vllm_server_base_url.rstrip("/"),
        server_lost_after_s=server_lost_after_s,
        weight_sync_timeout_s=float(args.weight_sync_timeout),
        last_answer=time.monotonic(),
        transport=os.environ.get(Env.WEIGHT_TRANSFER) or "nccl",
    )
    threading.Thread(
        target=watchdog, args=(watch, end_process), name="trlstack-watchdog", daemon=True
    ).start()
    return watch


def child_ended(exitcode: int | None) -> str:
    """How a child process ended, from its exit code (negative: the signal that killed it)."""
    if exitcode is not None and exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with code {exitcode}"


def timed(method: Callable[..., Any], watch: Watch) -> Callable[..., Any]:
    """Wrap a method that moves weights so that the watchdog knows since when it runs."""

    @functools.wraps(method)
    def timed_method(*args: Any, **kwargs: Any) -> Any:
        watch.sync_since = time.monotonic()
        try:
            return method(*args, **kwargs)
        finally:
            watch.sync_since = None

    return timed_method


def died_unreported(worker: Any) -> str | None:
    """How the rollout worker's child died without reporting an error, or None: not started, stopping (the
    trainer ends it at the end of training), alive, or failed with a report, which TRL's check raises with the
    child's traceback."""
    process = getattr(worker, "_process", None)
    if process is None or worker._stop_event_mp.is_set() or worker._failed_event.is_set():
        return None
    if process.is_alive():
        return None
    return (
        f"the rollout worker (pid {process.pid}) {child_ended(process.exitcode)} without reporting an error "
        "(the out-of-memory killer, a kill from outside); no more samples will come. Run train again to "
        "resume from the last checkpoint."
    )


def checked_alive(check_health: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap AsyncRolloutWorker.check_health: a child that ended is reported at once, with how it ended."""

    @functools.wraps(check_health)
    def check_health_and_liveness(worker: Any, stale_after_s: float) -> Any:
        cause = died_unreported(worker)
        if cause is not None:
            raise RuntimeError(cause)
        return check_health(worker, stale_after_s)

    return check_health_and_liveness


def watched_start(start: Callable[..., Any], watch: Watch) -> Callable[..., Any]:
    """Wrap AsyncRolloutWorker.start: once its child runs, the watchdog watches it too."""

    @functools.wraps(start)
    def start_and_watch(worker: Any) -> Any:
        started = start(worker)
        watch.worker = worker
        return started

    return start_and_watch


def child_main_ignoring_stops(*args: Any) -> Any:
    """The rollout child's entry point: the stop signals ignored first, then TRL's own (imported afresh in
    the child, where nothing replaced it)."""
    from trl.experimental.async_grpo import async_rollout_worker

    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if async_rollout_worker._child_main is child_main_ignoring_stops:
        raise RuntimeError("the rollout child found trlstack's entry point in place of TRL's")
    return async_rollout_worker._child_main(*args)


def guard(
    trainer_cls: Any, worker_module: Any, transfer_cls: Any, args: Any, server_lost_after_s: float
) -> None:
    """Install the guards in this process (rank 0 only asks the server: it holds the worker and the sync)."""
    worker_cls = worker_module.AsyncRolloutWorker
    worker_cls.check_health = checked_alive(worker_cls.check_health)
    # start() hands the module's `_child_main` to the spawned child by module and name: this one stands in.
    worker_module._child_main = child_main_ignoring_stops
    if os.environ.get("RANK", "0") != "0":
        return
    watch = start_watchdog(args, server_lost_after_s)
    worker_cls.start = watched_start(worker_cls.start, watch)
    trainer_cls._sync_weight = timed(trainer_cls._sync_weight, watch)
    transfer_cls.init_weight_transfer = timed(transfer_cls.init_weight_transfer, watch)
