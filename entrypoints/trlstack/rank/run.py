"""Every training process runs its recipe's script through this module, so that a stop signal ends training
with a complete checkpoint:

    accelerate launch ... -m trlstack.rank.run trl.scripts.grpo --config FILE [ARGS...]

It runs the script module as `__main__`, unchanged, after wrapping transformers' `Trainer.train`, which every
recipe's script calls once. A stop signal (SIGTERM or SIGINT, from `train`: see roles/train/stopping.py) then
means, depending on how far the run is:

- starting (loading the model and data): exit at once; there is nothing to save yet;
- training: finish the step in progress; at the end of every step all processes learn whether any of them was
  asked to stop (one all-gather of one number), so they save `checkpoint-N` together, through the trainer's
  own checkpointing (trainer_state.json last), and leave the loop; the script's final save is skipped;
- finishing (the script's final save after the last step): complete it.

A save the disk has no room for ends the run in every process, reported to train (rank/space.py).
Every trainer is also watched (rank/watch.py): its metrics carry where each step's time goes, the throughput,
each rank's GPU memory peak and the vLLM server's metrics, and the log says how far the run is.

The process then exits 0, so that no launcher (accelerate, torch elastic) reports a failure; `train`, which
sent the signal, exits 128 + its number. transformers' own `enable_jit_checkpoint` is no substitute: it
handles SIGTERM only, decides in each process alone (a save that is collective then hangs), and saves before
the step ends, so the step's gradient is lost and the next step resumes mid-way.
"""

from __future__ import annotations

import functools
import os
import re
import runpy
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any

from trlstack.defaults import Env
from trlstack.rank import space, watch

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass
class Stop:
    """The first stop signal this process received (0: none), and how far the run is."""

    signum: int = 0
    phase: str = "starting"  # then "training", then "finishing"


STOP = Stop()


def say(message: str) -> None:
    """A line on stderr from the first process only (torch elastic sets RANK; one process has none)."""
    if os.environ.get("RANK", "0") == "0":
        print(f"train: {message}", file=sys.stderr, flush=True)


def on_signal(signum: int, frame: FrameType | None) -> None:
    if not STOP.signum:
        STOP.signum = signum
        name = signal.Signals(signum).name
        if STOP.phase == "starting":
            say(f"{name} before training started: stopping; there is nothing to save yet")
        elif STOP.phase == "finishing":
            say(f"{name} after the last step: finishing the final save first")
    if STOP.phase == "starting":
        raise SystemExit(0)


def handle_stop_signals() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)


def agreed_signal(accelerator: Any) -> int:
    """The stop signal any process received (0: none); every process gets the same answer."""
    import torch

    mine = torch.tensor([STOP.signum], device=accelerator.device)
    return int(accelerator.gather(mine).max())


def checkpoint_on_stop(accelerator: Any) -> Any:
    """A trainer callback: after any process was asked to stop, save at the end of this step and stop."""
    from transformers import TrainerCallback

    class CheckpointOnStop(TrainerCallback):  # type: ignore[misc]  # transformers is untyped here
        stopped_at: int | None = None

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            signum = agreed_signal(accelerator)
            if signum and self.stopped_at is None:
                self.stopped_at = state.global_step
                control.should_save = True  # after DefaultFlowCallback's decision: a save on every step
                control.should_training_stop = True
                say(
                    f"{signal.Signals(signum).name}: step {state.global_step} done; saving "
                    f"checkpoint-{state.global_step}, then stopping"
                )
            return control

    return CheckpointOnStop()


def until_stopped(train: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap Trainer.train: checkpoint and stop on a signal, then end the process instead of returning."""

    @functools.wraps(train)
    def train_until_stopped(trainer: Any, *args: Any, **kwargs: Any) -> Any:
        from trlstack.rank import reward_guard

        callback = checkpoint_on_stop(trainer.accelerator)
        trainer.add_callback(callback)
        space.guard_saves(trainer, say)  # a save the disk has no room for ends the run, reported to train
        reward_guard.install(trainer, say)  # a reward that raises ends the run naming it, step saved
        watch.attach(trainer, say)  # where each step's time goes, throughput, memory, progress
        handle_stop_signals()  # again: setting up the trainer may have replaced the handler
        STOP.phase = "training"
        try:
            output = train(trainer, *args, **kwargs)
        except Exception as error:  # async-grpo: its rollout worker's reward failure, raised here
            reward_guard.after_worker_failure(trainer, error, say)
            raise
        STOP.phase = "finishing"
        save_whole(trainer)
        step = callback.stopped_at
        if step is not None and step < trainer.state.max_steps:
            where = os.path.join(trainer.args.output_dir, f"checkpoint-{step}")
            say(f"stopped at step {step} of {trainer.state.max_steps}; {where} saved; run again to resume")
            raise SystemExit(0)  # not the script's final save: the run is not done
        return output

    return train_until_stopped


def save_whole(trainer: Any) -> None:
    """Make the script's final save_model write the whole model (safetensors, as without sharding): an FSDP2
    run saves its checkpoints sharded, one shard per process, and transformers then saves no weights at the
    end at all. Every process gathers; the first writes."""
    plugin = getattr(trainer.accelerator.state, "fsdp_plugin", None)
    if plugin is not None and "SHARDED_STATE_DICT" in str(plugin.state_dict_type):
        plugin.set_state_dict_type("FULL_STATE_DICT")


def load_cpu_n_locations() -> None:
    """Let torch.load restore storages onto `cpu:N`. transformers resumes a run of several processes with each
    process's device as map_location, which for processes on the CPU (train --cpu --num-processes N) is
    `cpu:N`, a location torch refuses ("don't know how to restore data location ... (tagged with cpu:0)")."""
    import torch

    def on_cpu(storage: Any, location: str) -> Any:
        return storage if re.fullmatch(r"cpu:\d+", location) else None

    torch.serialization.register_package(50, lambda storage: None, on_cpu)


def shared_gpu_rank(environ: Mapping[str, str]) -> dict[str, str]:
    """What a rank sharing its GPU with others (train --ranks-per-gpu K, K > 1) changes in its environment
    before torch starts, from the launcher's LOCAL_RANK: empty for a rank alone on its GPU.

    NCCL refuses two ranks of one communicator on one GPU of one host ("Duplicate GPU detected"), so each
    rank names itself a host of its own (NCCL_HOSTID ...-rankN) and NCCL moves its traffic over sockets. The
    rank then sees only its GPU (ranks 0..K-1 the first visible one, K..2K-1 the second, ...) and is local
    rank 0 of 1, as on a host of its own: accelerate and vLLM take their device from the local rank, and
    accelerate's barrier names that device, which past the first would not exist."""
    per_gpu = int(environ.get(Env.RANKS_PER_GPU) or 1)
    if per_gpu <= 1 or "LOCAL_RANK" not in environ:
        return {}
    rank = int(environ["LOCAL_RANK"])
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    gpus = visible.split(",") if visible else [str(i) for i in range(rank // per_gpu + 1)]
    host = environ.get(Env.NCCL_HOSTID) or f"{socket.gethostname()}-trlstack-train"
    return {
        Env.NCCL_HOSTID: f"{host}-rank{rank}",
        "CUDA_VISIBLE_DEVICES": gpus[rank // per_gpu].strip(),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
    }


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m trlstack.rank.run MODULE [ARGS...]")
    handle_stop_signals()  # first, before the imports that take seconds
    os.environ.update(shared_gpu_rank(os.environ))
    import transformers

    transformers.Trainer.train = until_stopped(transformers.Trainer.train)
    watch.install()
    load_cpu_n_locations()
    if os.environ.get(Env.WEIGHT_TRANSFER):  # train chose how the weights reach the server: before the guard,
        from trlstack.rank import (
            ipc_push,
        )  # which bounds the pushes this replaces (imports TRL, vLLM's sender)

        ipc_push.install(say, argv[0], os.environ)
    if os.environ.get(Env.WEIGHT_PUSH_TIMEOUT):  # train bounds each weight push to vLLM in every rank
        from trlstack.rank import push_guard  # imports TRL's generation modules

        push_guard.install(say, argv[0], os.environ)
    if os.environ.get(Env.VLLM_KV_CACHE_GIB):  # train fixes the KV cache of each rank's colocated engine
        from trlstack.rank import kv_cache  # imports TRL's module that builds the engine, and vLLM

        kv_cache.install(say, argv[0], os.environ)
    sys.argv = argv  # the script parses its own arguments; runpy sets argv[0] to its file
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
