"""train's settings: each field is a flag (`--output-dir`) and a variable (TRLSTACK_OUTPUT_DIR), the
recipe named first."""

from __future__ import annotations

import argparse
import urllib.parse
from dataclasses import dataclass, field

from trlstack.defaults import (
    DEFAULT_HEALTH_TIMEOUT_S,
    DEFAULT_VLLM_URL,
    DEFAULT_WEIGHT_PUSH_TIMEOUT_S,
    Env,
)
from trlstack.gpus import gpu_spec
from trlstack.option_types import fraction, one_of, positive_float, positive_int, rank_number, wait_seconds
from trlstack.options import setting, switch
from trlstack.plan.rules import SHARED_MEMORY_FRACTION
from trlstack.ports import group_port_setting, main_process_port_setting
from trlstack.recipes import RECIPES
from trlstack.run import pipeline
from trlstack.run.sharding import sharding_choice
from trlstack.transfer import weight_transfer_setting

VLLM_MODES = ("server", "colocate")


def checked_url(raw: str) -> str:
    """argparse type: an http(s)://HOST:PORT URL, without a trailing slash."""
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an http(s)://HOST:PORT URL")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} has an invalid port") from None
    return raw.rstrip("/")


def checked_host(raw: str) -> str:
    """argparse type: an IP address or host name."""
    if not raw or "/" in raw or " " in raw:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an IP address or host name")
    return raw


# train's --help groups, each setting declared in one.
RUN, VLLM, LAYOUT, MACHINES, ASYNC = "the run", "vLLM", "the layout", "multi-node", pipeline.GROUP


@dataclass(frozen=True)
class TrainSettings:
    """train's settings: each field is a flag (`--output-dir`) and a variable (TRLSTACK_OUTPUT_DIR)."""

    recipe: str | None = setting(
        Env.RECIPE, "the recipe to train", type=one_of(*RECIPES), positional=True, group=RUN
    )
    task: str | None = setting(
        Env.TASK,
        "a task folder: its config.yaml (unless --config), reward modules (importable), data and model "
        "(paths in its config are relative to it); checked before anything starts",
        group=RUN,
    )
    config: str | None = setting(
        Env.CONFIG,
        "YAML config in TRL's format",
        shown="the task's config.yaml, else the recipe's own",
        group=RUN,
    )
    model: str | None = setting(Env.MODEL, "model to train; overrides model_name_or_path", group=RUN)
    dataset: str | None = setting(
        Env.DATASET, "dataset (Hub id or local path); overrides dataset_name", group=RUN
    )
    reward_model: str | None = setting(Env.REWARD_MODEL, "reward model judging completions", group=RUN)
    vllm_url: str | None = setting(  # None: no server named (`server_url`: where one is looked for)
        Env.VLLM_URL,
        "the vLLM server; naming one trains against it, on one GPU too",
        type=checked_url,
        shown=DEFAULT_VLLM_URL,
        group=VLLM,
    )
    group_port: int = group_port_setting(group=VLLM)
    host_ip: str | None = setting(
        Env.VLLM_HOST_IP,
        "this trainer's address as the server reaches it (NCCL rendezvous)",
        type=checked_host,
        shown="127.0.0.1 for a server on this machine, else the address this machine reaches the server from",
        group=VLLM,
    )
    num_processes: int | None = setting(
        Env.NUM_PROCESSES,
        "training processes",
        type=positive_int,
        shown="the visible GPUs; with --cpu, 1",
        group=LAYOUT,
    )
    ranks_per_gpu: int = setting(
        Env.RANKS_PER_GPU,
        "training processes on each GPU. More than one is for testing several ranks (FSDP2, async-grpo's "
        "two) on fewer GPUs: each rank names itself an NCCL host of its own, so the ranks talk over sockets, "
        "and they time-slice the GPU and split its memory",
        1,
        positive_int,
        group=LAYOUT,
    )
    sharding: str = setting(
        Env.SHARDING,
        "none (DDP: a whole copy of the model states in each process), fsdp2 (each process holds its share), "
        "or auto: fsdp2 where the memory estimate says DDP would not fit (`trlstack plan --model`)",
        "auto",
        sharding_choice,
        group=LAYOUT,
    )
    serve_gpus: tuple[int, ...] | None = setting(
        Env.SERVE_GPUS,
        "the server's GPU indices on the host, e.g. 0-3, to refuse training on them (needs all GPUs visible)",
        type=gpu_spec,
        group=LAYOUT,
    )
    share_gpus: bool = switch(
        Env.SHARE_GPUS,
        "the server runs on these GPUs too (a plan with SHARE_GPUS=1): train although --serve-gpus overlaps; "
        "the weights go through CUDA IPC (--weight-transfer auto), or over NCCL, this role then naming "
        "itself a host of its own to NCCL, which refuses two ranks on one GPU of one host",
        group=LAYOUT,
    )
    weight_transfer: str = weight_transfer_setting(group=VLLM)
    output_dir: str | None = setting(
        Env.OUTPUT_DIR,
        "where checkpoints go; overrides output_dir",
        shown="the config's output_dir, else outputs/RECIPE",
        group=RUN,
    )
    resume: bool = switch(
        Env.RESUME,
        "where the output folder holds another run (other model, data, reward...): continue it anyway",
        group=RUN,
    )
    fresh: bool = switch(
        Env.FRESH,
        "where the output folder holds another run: move it aside to OUTPUT_DIR.DATE-TIME and start anew",
        group=RUN,
    )
    health_timeout: float = setting(
        Env.HEALTH_TIMEOUT,
        "seconds to wait for the server's /health",
        DEFAULT_HEALTH_TIMEOUT_S,
        wait_seconds,
        group=VLLM,
    )
    weight_push_timeout: float | None = setting(  # None means the default, for the recipes that push
        Env.WEIGHT_PUSH_TIMEOUT,
        "seconds one weight push to vLLM may take (grpo, rloo, online-dpo) before the run ends, each rank "
        "naming what it is stuck in: a 70B model's full gather and broadcast over NCCL sockets takes "
        "minutes; without a bound, a stuck rank or server holds every rank for NCCL's own 30 minutes",
        type=wait_seconds,
        shown=f"{DEFAULT_WEIGHT_PUSH_TIMEOUT_S:g}",
        group=VLLM,
    )
    vllm_mode: str | None = setting(  # None: decided by the GPUs (run/mode.py), as the plan decides it
        Env.VLLM_MODE,
        "where vLLM generates: a server, or colocate (inside the trainer)",
        type=one_of(*VLLM_MODES),
        shown="colocate on one visible GPU with no server named (--vllm-url, --share-gpus, --serve-gpus), as "
        "`trlstack plan` plans one GPU; else server",
        group=VLLM,
    )
    gpu_memory_utilization: float | None = setting(  # None: the plan's share (plan.vllm_fraction)
        Env.GPU_MEMORY_UTILIZATION,
        "with --share-gpus: the server's fraction of each GPU's memory, as serve-vllm takes it; the "
        "trainer's memory is weighed in the rest",
        type=fraction,
        shown=f"{SHARED_MEMORY_FRACTION}",
        group=LAYOUT,
    )
    vllm_kv_cache_gib: float | None = setting(  # None: vLLM sizes it from its start-up memory profile
        Env.VLLM_KV_CACHE_GIB,
        "colocate: a fixed KV cache of this many GiB in each rank's vLLM engine, instead of one sized from "
        "the memory vLLM profiles free at start-up, a profile another process on the GPU upsets (needed for "
        "--ranks-per-gpu above 1 with colocate)",
        type=positive_float,
        shown="sized by vLLM's start-up profile",
        group=VLLM,
    )
    cpu: bool = switch(Env.CPU, "smoke run on the CPU: no vLLM, tiny steps", group=RUN)
    allow_other_served_model: bool = switch(
        Env.ALLOW_OTHER_SERVED_MODEL,
        "train although the server serves a model not recognised as this one (by name, Hub repo or "
        "config.json), e.g. a copy this machine cannot read; another model fails at the first weight sync",
        group=VLLM,
    )
    # Several machines: one train on each, placed by its rank (`trlstack slurm` sets these).
    num_machines: int = setting(
        Env.NUM_MACHINES, "training machines in all, one train on each", 1, positive_int, group=MACHINES
    )
    machine_rank: int = setting(
        Env.MACHINE_RANK, "this machine's rank among them, from 0", 0, rank_number, group=MACHINES
    )
    main_process_ip: str | None = setting(
        Env.MAIN_PROCESS_IP,
        "with --num-machines: the rank-0 machine's address, where the machines meet",
        type=checked_host,
        group=MACHINES,
    )
    main_process_port: int = main_process_port_setting(group=MACHINES)
    # async-grpo's pipeline (--help group ASYNC): each defaults to the config's value (pipeline.py says TRL's
    # and why).
    max_staleness: int | None = pipeline.max_staleness_setting()
    weight_sync_steps: int | None = pipeline.weight_sync_steps_setting()
    weight_sync_timeout: int | None = pipeline.weight_sync_timeout_setting()
    heartbeat_timeout: float | None = pipeline.heartbeat_timeout_setting()
    server_lost_after: float | None = pipeline.server_lost_after_setting()
    extra: list[str] = field(default_factory=list)  # after `--`: passed to the TRL script unchanged

    @property
    def mode(self) -> str:
        """ "cpu", "server" or "colocate" (unset: server; run/mode.py decides it from the GPUs first)."""
        return "cpu" if self.cpu else (self.vllm_mode or "server")

    @property
    def server_url(self) -> str:
        """Where the vLLM server is: the one named, else the default."""
        return self.vllm_url or DEFAULT_VLLM_URL

    @property
    def push_timeout(self) -> float:
        """Seconds one weight push to vLLM may take."""
        return self.weight_push_timeout or DEFAULT_WEIGHT_PUSH_TIMEOUT_S
