"""train's checks of its settings before anything starts: contradictions between settings, several
machines, and the server's GPUs against the trainer's."""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence

from trlstack import addresses
from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.gpus import Gpu, describe_indices
from trlstack.plan.rules import check_ports
from trlstack.recipes import Recipe
from trlstack.run import asynchronous
from trlstack.run.settings import TrainSettings


def check_resume_choice(settings: TrainSettings) -> None:
    if settings.resume and settings.fresh:
        raise UsageError(
            f"--resume continues the other run in the output folder, --fresh moves it aside ({Env.RESUME}, "
            f"{Env.FRESH}); choose one."
        )


def check_contradictions(settings: TrainSettings, recipe: Recipe) -> None:
    check_resume_choice(settings)
    if settings.share_gpus and settings.mode != "server":
        raise UsageError(
            f"--share-gpus ({Env.SHARE_GPUS}) runs the trainer beside a vLLM server on the same GPUs, but "
            f"this is a {settings.mode} run, which starts no server; drop one of the two."
        )
    check_ranks(settings, settings.mode, "--vllm-mode colocate")
    if settings.cpu and settings.vllm_mode is not None:
        raise UsageError(
            f"--cpu runs without vLLM, but --vllm-mode {settings.vllm_mode} (or {Env.VLLM_MODE}) asks "
            "for it; drop one of the two."
        )
    check_machines(settings)
    if settings.mode == "server":
        url = urllib.parse.urlsplit(settings.server_url)
        http = url.port or (443 if url.scheme == "https" else 80)
        check_ports({"the port of --vllm-url": http, "--group-port": settings.group_port})
    asynchronous.check(settings, recipe)  # what a server-only recipe cannot do


def check_job(
    settings: TrainSettings, recipe: Recipe, mode: str, colocated_by: str, ranks: int | None
) -> None:
    """The checks train makes on start that hold for every node of a job `trlstack slurm` writes, made once
    on the submit host: --resume/--fresh, the ranks against the job's `mode` (cpu, server or colocate;
    `colocated_by`: the flag that put vLLM in the trainers) and a server-only recipe's limits over the job's
    trainer `ranks` (None: no GPUs)."""
    check_resume_choice(settings)
    check_ranks(settings, mode, colocated_by)
    asynchronous.check(settings, recipe)
    if recipe.server_only and ranks is not None:
        asynchronous.sharding_for(ranks, settings.sharding)


def check_ranks(settings: TrainSettings, mode: str, colocated_by: str) -> None:
    """--ranks-per-gpu, --vllm-kv-cache-gib and --weight-push-timeout against the run's mode, "cpu", "server"
    or "colocate" (`colocated_by`: the flag that put vLLM in the trainer; `trlstack slurm` checks its job so
    too)."""
    if mode == "cpu" and settings.ranks_per_gpu > 1:
        raise UsageError(
            f"--ranks-per-gpu {settings.ranks_per_gpu} ({Env.RANKS_PER_GPU}) puts several ranks on each GPU, "
            "but --cpu trains on none; use --num-processes for several CPU processes."
        )
    kv_cache = f"--vllm-kv-cache-gib ({Env.VLLM_KV_CACHE_GIB})"
    if settings.vllm_kv_cache_gib is not None and mode != "colocate":
        where = (
            "--cpu runs without vLLM"
            if mode == "cpu"
            else "in server mode the server sizes its own (give it vLLM's --kv-cache-memory-bytes)"
        )
        raise UsageError(
            f"{kv_cache} fixes the KV cache of the vLLM engine inside each trainer ({colocated_by}), but "
            f"{where}; drop it."
        )
    if settings.ranks_per_gpu > 1 and mode == "colocate" and settings.vllm_kv_cache_gib is None:
        raise UsageError(
            f"--ranks-per-gpu {settings.ranks_per_gpu} with {colocated_by} starts a vLLM engine in every "
            "rank on the same GPU at once, and an engine that sizes its KV cache from the memory it profiles "
            "free fails when another process frees GPU memory meanwhile (seen on an H200: 'Error in memory "
            f"profiling'); give each engine a fixed KV cache with {kv_cache}, e.g. 2, or run several "
            "ranks on one GPU in server mode (with --share-gpus beside the server)."
        )
    if mode == "cpu" and settings.weight_push_timeout is not None:
        raise UsageError(
            f"--cpu runs without vLLM, but --weight-push-timeout ({Env.WEIGHT_PUSH_TIMEOUT}) bounds the "
            "weight push to it; drop one of the two."
        )


def check_machines(settings: TrainSettings) -> None:
    """Several machines need each one's rank below their count and the rank-0 machine's address, one the
    others can dial: neither loopback nor the any-address, in any spelling."""
    if settings.machine_rank >= settings.num_machines:
        raise UsageError(
            f"--machine-rank {settings.machine_rank} ({Env.MACHINE_RANK}) is not below --num-machines "
            f"{settings.num_machines} ({Env.NUM_MACHINES}); ranks count from 0 to "
            f"{settings.num_machines - 1}."
        )
    if settings.num_machines == 1:
        return
    flag = f"--main-process-ip ({Env.MAIN_PROCESS_IP})"
    address = settings.main_process_ip
    if not address:
        raise UsageError(
            f"--num-machines {settings.num_machines} needs {flag}: the address of the machine with rank 0, "
            "which every other machine connects to."
        )
    if addresses.is_loopback(address) or addresses.is_any_address(address):
        raise UsageError(
            f"{flag} is {address}, which every machine reads as itself, so the machines would never meet; "
            "give the rank-0 machine's address on the network the machines share."
        )


def check_overlap(train: Sequence[Gpu], serve_indices: Sequence[int], machine: Sequence[Gpu]) -> None:
    """UsageError when a training GPU is one of the server's GPUs (compared by UUID)."""
    by_index = {gpu.index: gpu for gpu in machine}
    absent = [index for index in serve_indices if index not in by_index]
    if absent:
        raise UsageError(
            f"--serve-gpus names GPU {describe_indices(absent)}, but this machine shows GPUs "
            f"{describe_indices(list(by_index))}. Give the server's indices as the host numbers them "
            "(nvidia-smi), or leave --serve-gpus unset where this container sees only its own GPUs."
        )
    serving = {by_index[index].uuid: index for index in serve_indices if by_index[index].uuid}
    # A MIG device overlaps the GPU it is a slice of.
    shared = [uuid for uuid in (gpu.physical_uuid for gpu in train) if uuid in serving]
    if shared:
        names = ", ".join(f"GPU {serving[uuid]} ({uuid})" for uuid in shared)
        raise UsageError(
            f"the trainer would use {names}, which --serve-gpus gives the vLLM server. Give the two "
            "disjoint GPU sets through CUDA_VISIBLE_DEVICES (`trlstack plan` prints a split), on one "
            f"GPU use --vllm-mode colocate, or share the GPUs on purpose with --share-gpus "
            f"({Env.SHARE_GPUS}=1)."
        )
