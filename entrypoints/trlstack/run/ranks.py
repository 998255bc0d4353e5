"""What every training rank on this machine gets, pure: how many there are, how they share a GPU, and the
bound on their weight push to vLLM (each as the environment the ranks get and the notes to log)."""

from __future__ import annotations

from collections.abc import Sequence

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan.memory import GIB
from trlstack.plan.rules import ROLES, check_processes
from trlstack.run.settings import TrainSettings

NO_GPU = (
    "train needs a CUDA GPU and none is visible. Check the driver (`trlstack doctor`) and "
    "CUDA_VISIBLE_DEVICES, give the container GPUs, preview the command for a machine of N GPUs with "
    "--print-command --gpus N, or try --cpu for a smoke run."
)


def training_processes(settings: TrainSettings, gpus: Sequence[Gpu]) -> int:
    """--ranks-per-gpu processes per visible GPU (one unless told more) unless told fewer (the plan's rule,
    plan/rules.check_processes)."""
    if not gpus:
        raise UsageError(NO_GPU)
    shown = ",".join(str(gpu.index) for gpu in gpus)
    where = f"{Env.CUDA_VISIBLE_DEVICES}={shown}"
    return check_processes(settings.num_processes, len(gpus), settings.ranks_per_gpu, ROLES, where)


def rank_sharing(settings: TrainSettings) -> tuple[dict[str, str], list[str]]:
    """The environment and the note for ranks that share a GPU (--ranks-per-gpu above 1): NCCL refuses two
    ranks of one communicator on one GPU of one host, so each rank names itself a host of its own, which the
    recipe runner does from its rank before torch starts (rank/run.py). The count is set even when 1, as
    the runner reads the variable: one inherited from the shell must not outlive a flag that overrode it."""
    count: dict[str, str] = {Env.RANKS_PER_GPU: str(settings.ranks_per_gpu)}
    if settings.ranks_per_gpu == 1:
        return count, []
    note = (
        f"{settings.ranks_per_gpu} training ranks on each GPU: each its own NCCL host "
        f"({Env.NCCL_HOSTID}=...-rankN), so they talk over NCCL sockets and time-slice the GPU"
    )
    return count, [note]


def push_bound(settings: TrainSettings) -> tuple[dict[str, str], list[str]]:
    """The environment and the note that bound each weight push to vLLM in every rank (rank/run.py
    installs rank/push_guard.py where the variable is set)."""
    seconds = f"{settings.push_timeout:g}"
    note = (
        f"each weight push to vLLM ends the run past {seconds} s (--weight-push-timeout), every rank naming "
        "what it is stuck in"
    )
    return {Env.WEIGHT_PUSH_TIMEOUT: seconds}, [note]


def fixed_kv_cache(
    settings: TrainSettings, gpus: Sequence[Gpu], fraction: float
) -> tuple[dict[str, str], list[str]]:
    """The environment and the note that give each rank's colocated vLLM engine a fixed KV cache
    (--vllm-kv-cache-gib; rank/kv_cache.py hands it to vLLM); UsageError where the engines of one GPU
    cannot all start. `fraction` is vllm_gpu_memory_utilization: vLLM starts an engine only where that share
    of the GPU's memory is free, and the memory plan leaves each engine that share, its KV cache within it."""
    gib = settings.vllm_kv_cache_gib
    if gib is None:
        return {}, []
    engines = settings.ranks_per_gpu
    if engines > 1 and engines * fraction >= 1:
        raise UsageError(
            f"--ranks-per-gpu {engines} with colocate starts {engines} vLLM engines on each GPU, each "
            f"starting only where vllm_gpu_memory_utilization ({fraction:g}) of the GPU's memory is free: "
            f"{engines} x {fraction:g} leaves the trainers nothing. Set vllm_gpu_memory_utilization below "
            f"{1 / engines:.2g} (e.g. {0.5 / engines:.2g}) in the config or after `--`."
        )
    sizes = [gpu.memory_bytes for gpu in gpus if gpu.memory_bytes]
    if sizes and gib * GIB > min(sizes) * fraction:
        share = min(sizes) * fraction / GIB
        raise UsageError(
            f"--vllm-kv-cache-gib {gib:g} ({Env.VLLM_KV_CACHE_GIB}) is more than the {share:.1f} GiB that "
            f"vllm_gpu_memory_utilization ({fraction:g}) leaves each engine on a {min(sizes) / GIB:.0f} GiB "
            "GPU, its weights included; lower it, or raise vllm_gpu_memory_utilization (in the config or "
            "after `--`)."
        )
    note = (
        f"each rank's vLLM engine holds a fixed {gib:g} GiB KV cache (--vllm-kv-cache-gib), not one sized "
        "from the memory vLLM profiles free at start-up"
    )
    return {Env.VLLM_KV_CACHE_GIB: str(gib)}, [note]
