"""The GPU plan: which GPUs serve generations (vLLM) and which train (accelerate), and the sizes and ports
that follow; part of the core, which every role and command reads it from.

`make_plan` is a pure function of the GPUs and the request. The two GPU sets are disjoint unless the plan
shares them, which is only ever chosen (`--share-gpus`, SHARE_GPUS=1 in .env): then the server and the
trainer run on the same GPUs, vLLM takes a fraction of each GPU's memory, and the weight push goes over
NCCL's sockets instead of P2P/NVLink (each role gets its own NCCL host id). On one GPU with nothing asked
the plan runs no server: vLLM runs inside the trainer (colocate), the faster of the two (ONE_GPU_WHY).
Beside it: `render` (the plan for people, the `.env` keys compose reads, JSON) and `env_check` (a plan as
.env holds it, checked as the roles will read it). `trlstack plan` (commands/plan.py) is the command.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trlstack.defaults import DEFAULT_GROUP_PORT, DEFAULT_VLLM_PORT, Env
from trlstack.errors import UsageError
from trlstack.gpus import Gpu, describe_indices, describe_machine
from trlstack.option_types import fraction, positive_int
from trlstack.options import Setting

COLOCATE_FIX = (
    "to generate and train on the same GPU, run `train --vllm-mode colocate` instead of a vLLM server"
)
SHARE_FIX = "or run the server and the trainer on the same GPUs on purpose with --share-gpus (SHARE_GPUS=1)"
# vLLM's share of each GPU when the trainer runs beside it (TRL's own colocate default, 0.3); a plan of
# disjoint sets gives vLLM serve-vllm's default.
SHARED_MEMORY_FRACTION = 0.3
SPLIT_MEMORY_FRACTION = 0.9

# Why one GPU gets colocate by default: bench/gpu_server_mode.py side by side on one H200 (README, "One GPU").
ONE_GPU_WHY = (
    "measured faster on one GPU than a shared-GPU server: a GRPO step of 1.10 s against 1.58 s on one H200 "
    '(README.md, "One GPU"); --share-gpus chooses the server'
)
COLOCATE_VARIANT = "colocate"  # the compose layout (compose/colocate.yaml) a colocate plan selects

# The keys of `--format env`, in the order written; compose reads them from .env.
ENV_KEYS = (
    Env.PLAN_SERVE_GPUS,
    Env.PLAN_TRAIN_GPUS,
    Env.PLAN_TENSOR_PARALLEL_SIZE,
    Env.PLAN_DATA_PARALLEL_SIZE,
    Env.PLAN_NUM_PROCESSES,
    Env.PLAN_VLLM_PORT,
    Env.PLAN_VLLM_GROUP_PORT,
    Env.PLAN_SHARE_GPUS,
    Env.PLAN_GPU_MEMORY_UTILIZATION,
)
ENV_HEADER = "# GPU plan written by `trlstack plan`"


@dataclass(frozen=True)
class Plan:
    """GPU sets for the vLLM server and the trainer (disjoint, or the same set when `share_gpus`), vLLM's
    parallel layout and memory fraction, and the two ports."""

    serve: tuple[Gpu, ...]
    train: tuple[Gpu, ...]
    tensor_parallel_size: int
    port: int = DEFAULT_VLLM_PORT
    group_port: int = DEFAULT_GROUP_PORT
    share_gpus: bool = False
    gpu_memory_utilization: float = SPLIT_MEMORY_FRACTION
    colocate: bool = False  # no server: vLLM runs inside the trainer on `train` (`serve` is empty)

    @property
    def data_parallel_size(self) -> int:
        return len(self.serve) // self.tensor_parallel_size

    @property
    def num_processes(self) -> int:
        return len(self.train)

    @property
    def vllm_share_of_training_gpus(self) -> float:
        """vLLM's fraction of each training GPU's memory: where it runs there (shared or colocate), else 0."""
        return self.gpu_memory_utilization if self.share_gpus or self.colocate else 0.0

    @property
    def serve_indices(self) -> tuple[int, ...]:
        return tuple(gpu.index for gpu in self.serve)

    @property
    def train_indices(self) -> tuple[int, ...]:
        return tuple(gpu.index for gpu in self.train)

    def env(self) -> dict[str, str]:
        """The `.env` keys; GPU lists comma-separated, as CUDA_VISIBLE_DEVICES and compose take them. A
        colocate plan writes its layout and the trainer's keys only: no server runs to need the rest."""
        if self.colocate:
            return {
                Env.VARIANT: COLOCATE_VARIANT,
                Env.PLAN_TRAIN_GPUS: ",".join(map(str, self.train_indices)),
                Env.PLAN_NUM_PROCESSES: str(self.num_processes),
            }
        values = (
            ",".join(map(str, self.serve_indices)),
            ",".join(map(str, self.train_indices)),
            str(self.tensor_parallel_size),
            str(self.data_parallel_size),
            str(self.num_processes),
            str(self.port),
            str(self.group_port),
            "1" if self.share_gpus else "0",
            str(self.gpu_memory_utilization),
        )
        return dict(zip(ENV_KEYS, values, strict=True))


def _check_port(flag: str, port: int) -> None:
    if not 1 <= port <= 65535:
        raise UsageError(f"{flag} {port} is out of range; choose a TCP port from 1 to 65535.")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _pick(flag: str, indices: Sequence[int], by_index: Mapping[int, Gpu], machine: str) -> tuple[Gpu, ...]:
    """The GPUs a flag names, in the order written; every one must exist, once."""
    if not indices:
        raise UsageError(f"{flag} is empty; name at least one GPU ({machine}).")
    seen: set[int] = set()
    for index in indices:
        if index in seen:
            raise UsageError(f"{flag} names GPU {index} twice; list each GPU once.")
        seen.add(index)
        if index not in by_index:
            raise UsageError(f"{flag} names GPU {index}, which does not exist; {machine}.")
    return tuple(by_index[index] for index in indices)


def _split(
    gpus: Sequence[Gpu],
    serve_gpus: Sequence[int] | None,
    train_gpus: Sequence[int] | None,
    serve_count: int | None,
) -> tuple[tuple[Gpu, ...], tuple[Gpu, ...]]:
    by_index = {gpu.index: gpu for gpu in gpus}
    machine = describe_machine(gpus)
    if serve_count is not None:
        if serve_gpus is not None or train_gpus is not None:
            raise UsageError("give either --serve N or --serve-gpus/--train-gpus, not both.")
        if not 1 <= serve_count < len(gpus):
            raise UsageError(
                f"--serve {serve_count} must leave at least one GPU on each side; "
                f"{machine}, so choose --serve from 1 to {len(gpus) - 1}."
            )
        return tuple(gpus[:serve_count]), tuple(gpus[serve_count:])
    if serve_gpus is None and train_gpus is None:
        half = max(1, len(gpus) // 2)
        return tuple(gpus[:half]), tuple(gpus[half:])
    if serve_gpus is not None and train_gpus is not None:
        serve = _pick("--serve-gpus", serve_gpus, by_index, machine)
        train = _pick("--train-gpus", train_gpus, by_index, machine)
        shared = [gpu.index for gpu in serve if gpu in train]
        if shared:
            raise UsageError(
                f"GPU {describe_indices(shared)} is in both --serve-gpus and --train-gpus; the server and "
                f"the trainer need disjoint GPUs ({COLOCATE_FIX}, {SHARE_FIX})."
            )
        return serve, train
    # One side given: the other is the rest of the machine, and must keep a GPU.
    serving = serve_gpus is not None
    flag, indices = ("--serve-gpus", serve_gpus) if serving else ("--train-gpus", train_gpus)
    assert indices is not None  # neither given returned above
    chosen = _pick(flag, indices, by_index, machine)
    rest = tuple(gpu for gpu in gpus if gpu not in chosen)
    if not rest:
        lacking = "to train on" if serving else "for the vLLM server"
        raise UsageError(
            f"{flag} {describe_indices(indices)} leaves no GPU {lacking}; {machine}: "
            f"keep at least one out of {flag}, {SHARE_FIX}."
        )
    return (chosen, rest) if serving else (rest, chosen)


def _shared(
    gpus: Sequence[Gpu],
    serve_gpus: Sequence[int] | None,
    train_gpus: Sequence[int] | None,
    serve_count: int | None,
) -> tuple[tuple[Gpu, ...], tuple[Gpu, ...]]:
    """The one GPU set the server and the trainer share: every GPU, or the set given (once, or twice
    alike)."""
    if serve_count is not None:
        raise UsageError(
            "--serve N splits the GPUs, and --share-gpus runs both roles on the same GPUs; give one of "
            "the two."
        )
    by_index = {gpu.index: gpu for gpu in gpus}
    machine = describe_machine(gpus)
    serve = None if serve_gpus is None else _pick("--serve-gpus", serve_gpus, by_index, machine)
    train = None if train_gpus is None else _pick("--train-gpus", train_gpus, by_index, machine)
    if serve is not None and train is not None and set(serve) != set(train):
        raise UsageError(
            f"--share-gpus runs the server and the trainer on the same GPUs, but --serve-gpus "
            f"{describe_indices(serve_gpus or [])} and --train-gpus {describe_indices(train_gpus or [])} "
            "differ; give one set (or either flag alone)."
        )
    chosen = serve or train or tuple(gpus)
    return chosen, chosen


def make_plan(
    gpus: Sequence[Gpu],
    serve_gpus: Sequence[int] | None = None,
    train_gpus: Sequence[int] | None = None,
    serve_count: int | None = None,
    tensor_parallel_size: int | None = None,
    num_heads: int | None = None,
    port: int = DEFAULT_VLLM_PORT,
    group_port: int = DEFAULT_GROUP_PORT,
    share_gpus: bool = False,
    gpu_memory_utilization: float | None = None,
) -> Plan:
    """Split `gpus` between the vLLM server and the trainer; a bad request raises UsageError naming the fix.

    With no split given, the server takes the first half (rounded down, at least one) and training the rest;
    on a machine of one GPU, where no split exists, the plan is colocate, no server and vLLM inside the
    trainer (ONE_GPU_WHY). With `share_gpus` both run on the same GPUs: all of them, or the set given, which
    must then be one set for both. vLLM runs data-parallel replicas of `tensor_parallel_size` GPUs each
    (default 1: one replica per GPU), on `gpu_memory_utilization` of each GPU's memory (default:
    SHARED_MEMORY_FRACTION when shared, else SPLIT_MEMORY_FRACTION).
    """
    _check_port("--port", port)
    _check_port("--group-port", group_port)
    if port == group_port:
        raise UsageError(
            f"--port and --group-port are both {port}; the HTTP API and the NCCL weight-transfer group "
            "need different ports."
        )
    if len({gpu.index for gpu in gpus}) != len(gpus):
        raise ValueError(f"GPU indices repeat in {[gpu.index for gpu in gpus]}")
    if not gpus:
        raise UsageError(
            "a vLLM server plan needs a GPU, and there is none; pass --gpus N to plan for a machine with "
            "N GPUs."
        )
    tp = 1 if tensor_parallel_size is None else tensor_parallel_size
    if tp < 1:
        raise UsageError(f"--tensor-parallel-size {tp} must be at least 1.")
    if num_heads is not None and num_heads < 1:
        raise UsageError(f"--num-heads {num_heads} must be at least 1 (the model's attention heads).")
    asked = serve_count is not None or serve_gpus is not None or train_gpus is not None
    if len(gpus) == 1 and not share_gpus and not asked:
        return _colocate(gpus, tp, gpu_memory_utilization, port, group_port)
    if share_gpus:
        serve, train = _shared(gpus, serve_gpus, train_gpus, serve_count)
    else:
        serve, train = _split(gpus, serve_gpus, train_gpus, serve_count)
    fraction = gpu_memory_utilization
    if fraction is None:
        fraction = SHARED_MEMORY_FRACTION if share_gpus else SPLIT_MEMORY_FRACTION
    if not 0 < fraction <= 1:
        raise UsageError(f"--gpu-memory-utilization {fraction} must be a fraction above 0 and at most 1.")

    if len(serve) % tp:
        raise UsageError(
            f"--tensor-parallel-size {tp} does not divide the {len(serve)} serving GPUs; choose one of "
            f"{', '.join(map(str, _divisors(len(serve))))} (vLLM runs replicas of that many GPUs each)."
        )
    if num_heads is not None and num_heads % tp:
        fitting = _divisors(math.gcd(len(serve), num_heads))
        raise UsageError(
            f"--tensor-parallel-size {tp} does not divide the model's {num_heads} attention heads; choose "
            f"one of {', '.join(map(str, fitting))}."
        )
    return Plan(
        serve=serve,
        train=train,
        tensor_parallel_size=tp,
        port=port,
        group_port=group_port,
        share_gpus=share_gpus,
        gpu_memory_utilization=fraction,
    )


def _colocate(
    gpus: Sequence[Gpu],
    tensor_parallel_size: int,
    gpu_memory_utilization: float | None,
    port: int,
    group_port: int,
) -> Plan:
    """The one-GPU plan: the trainer on the GPU with vLLM inside it. The server's settings have no server
    to apply to, so asking for them is refused with the way to get one."""
    if tensor_parallel_size != 1:
        raise UsageError(
            f"--tensor-parallel-size {tensor_parallel_size} ({Env.TENSOR_PARALLEL_SIZE}) needs that many "
            "GPUs, and this machine has one."
        )
    if gpu_memory_utilization is not None:
        raise UsageError(
            f"--gpu-memory-utilization ({Env.GPU_MEMORY_UTILIZATION}) sets a vLLM server's share of each "
            "GPU, and the one-GPU plan runs no server (vLLM inside the trainer, colocate); add --share-gpus "
            "to plan a server beside the trainer, or set vllm_gpu_memory_utilization in the TRL config "
            f"({Env.CONFIG}) for colocate."
        )
    return Plan(
        serve=(),
        train=tuple(gpus),
        tensor_parallel_size=1,
        port=port,
        group_port=group_port,
        gpu_memory_utilization=SHARED_MEMORY_FRACTION,  # TRL's colocate default share, which it keeps
        colocate=True,
    )


# The plan's settings, declared once for every command that takes them (`trlstack plan`, `trlstack slurm`).

TENSOR_PARALLEL = Setting(
    Env.TENSOR_PARALLEL_SIZE,
    "GPUs per vLLM replica; must divide the serving GPUs and the model's attention heads",
    positive_int,
)


MEMORY_FRACTION = Setting(
    Env.GPU_MEMORY_UTILIZATION,
    "fraction of each serving GPU's memory vLLM takes",
    fraction,
    shown=f"{SHARED_MEMORY_FRACTION} with shared GPUs, else {SPLIT_MEMORY_FRACTION}",
)
