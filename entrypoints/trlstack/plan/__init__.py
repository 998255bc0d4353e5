"""The GPU plan: which GPUs serve generations (vLLM) and which train (accelerate), and the sizes and ports
that follow; part of the core, which every role and command reads it from.

`make_plan` is a pure function of the GPUs and the request. The two GPU sets are disjoint unless the plan
shares them (`--share-gpus`, SHARE_GPUS=1 in .env): then the server and the trainer run on the same GPUs,
vLLM takes a fraction of each GPU's memory, and the weights go through CUDA IPC (transfer.py), or over
NCCL's sockets where --weight-transfer nccl says so. On one GPU with nothing asked the plan takes the layout
measured faster for the model's size (ONE_GPU_STEPS): vLLM inside the trainer (colocate), or a server
beside it on the shared GPU.
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
from trlstack.transfer import AUTO, NCCL, check, resolve

COLOCATE_FIX = (
    "to generate and train on the same GPU, run `train --vllm-mode colocate` instead of a vLLM server"
)
SHARE_FIX = "or run the server and the trainer on the same GPUs on purpose with --share-gpus (SHARE_GPUS=1)"
# vLLM's share of each GPU when the trainer runs beside it (TRL's own colocate default, 0.3); a plan of
# disjoint sets gives vLLM serve-vllm's default.
SHARED_MEMORY_FRACTION = 0.3
SPLIT_MEMORY_FRACTION = 0.9


def vllm_fraction(shared: bool, asked: float | None = None) -> float:
    """vLLM's fraction of the memory of each GPU it serves on: the one asked for, else the share that leaves a
    trainer beside it the rest (`shared`), else most of a GPU of its own. The plan, serve-vllm and train all
    take it from here."""
    if asked is not None:
        return asked
    return SHARED_MEMORY_FRACTION if shared else SPLIT_MEMORY_FRACTION


@dataclass(frozen=True)
class OneGpuStep:
    """A GRPO step on one GPU at one model size, side by side (bench/gpu_server_mode.py: TRL's defaults, bf16
    weights, random-weight Qwen2.5 shapes): vLLM inside the trainer (colocate) against a server beside it on
    the shared GPU, weights pushed through CUDA IPC. None: not measured."""

    shape: str
    parameters: int
    colocate_s: float | None
    server_ipc_s: float | None
    where: str  # the GPU
    server_nccl_s: float | None = None  # the server over NCCL sockets, measured before CUDA IPC

    @property
    def server_faster(self) -> bool:
        return (
            self.colocate_s is not None
            and self.server_ipc_s is not None
            and self.server_ipc_s < self.colocate_s
        )


# The one-GPU layout per model size: the faster of the two at the measured size nearest the model's
# (README.md, "One GPU"). Until a size's shared-GPU server over CUDA IPC is measured, colocate, measured
# faster than that server over NCCL sockets (1.10 s against 1.58 s a step at 0.5B on one H200).
ONE_GPU_STEPS = (
    OneGpuStep("0.5B", 494_032_768, 1.10, None, "one H200", server_nccl_s=1.58),
    OneGpuStep("1.5B", 1_543_714_304, None, None, "not measured"),
    OneGpuStep("3B", 3_085_938_688, None, None, "not measured"),
)
DEFAULT_PARAMETERS = ONE_GPU_STEPS[0].parameters  # the default model's size (Qwen2.5-0.5B-Instruct)


def nearest_step(parameters: int | None, steps: Sequence[OneGpuStep] = ONE_GPU_STEPS) -> OneGpuStep:
    """The measured size nearest `parameters` (by ratio; None: the default model's)."""
    count = parameters or DEFAULT_PARAMETERS
    return min(steps, key=lambda step: abs(math.log(count / step.parameters)))


def one_gpu_choice(parameters: int | None, steps: Sequence[OneGpuStep] = ONE_GPU_STEPS) -> tuple[bool, str]:
    """On one GPU with nothing asked: whether the plan runs a server beside the trainer (True) or colocate,
    and why, from the measured size nearest the model's."""
    step = nearest_step(parameters, steps)
    size = "the default model's size" if parameters is None else f"{parameters / 1e9:.2g}B parameters"
    if step.server_faster:
        return True, (
            f"measured faster at {step.shape} ({size}) than colocate: a GRPO step of "
            f"{step.server_ipc_s:.2f} s against {step.colocate_s:.2f} s ({step.where}; README.md, "
            '"One GPU"); --vllm-mode colocate in train runs vLLM inside the trainer instead'
        )
    if step.colocate_s is None:
        return False, (
            f"colocate until a server on one GPU is measured faster at {step.shape} ({size}; README.md, "
            '"One GPU"); --share-gpus chooses the server'
        )
    against = ""
    if step.server_ipc_s is not None:
        against = f" against {step.server_ipc_s:.2f} s for a shared-GPU server (CUDA IPC)"
    elif step.server_nccl_s is not None:
        against = f" against {step.server_nccl_s:.2f} s for a shared-GPU server over NCCL sockets"
    return False, (
        f"measured faster on one GPU at {step.shape} ({size}): a GRPO step of {step.colocate_s:.2f} s"
        f'{against} ({step.where}; README.md, "One GPU"); --share-gpus chooses the server'
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
    Env.PLAN_WEIGHT_TRANSFER,
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
    weight_transfer: str = NCCL  # how the weights reach the server (transfer.py), resolved
    why: str = ""  # why the plan chose its layout itself (one GPU, nothing asked), else empty

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
            self.weight_transfer,
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


def _check_request(
    gpus: Sequence[Gpu], port: int, group_port: int, tensor_parallel_size: int | None, num_heads: int | None
) -> None:
    """What a plan request must hold whatever the split: two distinct ports, a GPU, sizes of at least 1."""
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
    if tensor_parallel_size is not None and tensor_parallel_size < 1:
        raise UsageError(f"--tensor-parallel-size {tensor_parallel_size} must be at least 1.")
    if num_heads is not None and num_heads < 1:
        raise UsageError(f"--num-heads {num_heads} must be at least 1 (the model's attention heads).")


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
    weight_transfer: str = AUTO,
    parameters: int | None = None,
) -> Plan:
    """Split `gpus` between the vLLM server and the trainer; a bad request raises UsageError naming the fix.

    With no split given, the server takes the first half (rounded down, at least one) and training the rest;
    on a machine of one GPU, where no split exists, the plan takes the layout measured faster for a model of
    `parameters` (one_gpu_choice): colocate, no server and vLLM inside the trainer, or a server sharing the
    GPU. With `share_gpus` both run on the same GPUs: all of them, or the set given, which must then be one
    set for both. vLLM runs data-parallel replicas of `tensor_parallel_size` GPUs each (default 1: one replica
    per GPU), on `gpu_memory_utilization` of each GPU's memory (default: SHARED_MEMORY_FRACTION when shared,
    else SPLIT_MEMORY_FRACTION). The weights go through `weight_transfer` (transfer.resolve: auto is CUDA IPC
    where the GPUs are shared, else NCCL).
    """
    _check_request(gpus, port, group_port, tensor_parallel_size, num_heads)
    tp = 1 if tensor_parallel_size is None else tensor_parallel_size
    asked = serve_count is not None or serve_gpus is not None or train_gpus is not None
    why = ""
    if len(gpus) == 1 and not share_gpus and not asked:
        share_gpus, why = one_gpu_choice(parameters)
        if not share_gpus:
            return _colocate(gpus, tp, gpu_memory_utilization, port, group_port, weight_transfer, why)
    if share_gpus:
        serve, train = _shared(gpus, serve_gpus, train_gpus, serve_count)
    else:
        serve, train = _split(gpus, serve_gpus, train_gpus, serve_count)
    fraction = vllm_fraction(share_gpus, gpu_memory_utilization)
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
    transfer = resolve(weight_transfer, share_gpus)
    check(transfer, share_gpus)
    return Plan(
        serve=serve,
        train=train,
        tensor_parallel_size=tp,
        port=port,
        group_port=group_port,
        share_gpus=share_gpus,
        gpu_memory_utilization=fraction,
        weight_transfer=transfer,
        why=why,
    )


def _colocate(
    gpus: Sequence[Gpu],
    tensor_parallel_size: int,
    gpu_memory_utilization: float | None,
    port: int,
    group_port: int,
    weight_transfer: str,
    why: str,
) -> Plan:
    """The one-GPU plan: the trainer on the GPU with vLLM inside it. The server's settings have no server
    to apply to, so asking for them is refused with the way to get one."""
    if weight_transfer != AUTO:
        raise UsageError(
            f"--weight-transfer {weight_transfer} ({Env.WEIGHT_TRANSFER}) sets how weights reach a vLLM "
            "server, and the one-GPU plan for this model runs none (vLLM inside the trainer, colocate); add "
            "--share-gpus to plan a server beside the trainer, or drop it."
        )
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
        why=why,
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
