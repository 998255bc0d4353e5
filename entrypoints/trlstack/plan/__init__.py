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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trlstack.defaults import DEFAULT_GROUP_PORT, DEFAULT_VLLM_PORT, Env
from trlstack.errors import UsageError
from trlstack.gpus import Gpu, describe_indices, describe_machine
from trlstack.option_types import fraction, positive_int
from trlstack.options import Setting
from trlstack.plan.one_gpu import DEFAULT_PARAMETERS as DEFAULT_PARAMETERS
from trlstack.plan.one_gpu import ONE_GPU_STEPS as ONE_GPU_STEPS
from trlstack.plan.one_gpu import OneGpuStep as OneGpuStep
from trlstack.plan.one_gpu import nearest_step as nearest_step
from trlstack.plan.one_gpu import one_gpu_choice as one_gpu_choice
from trlstack.plan.one_gpu import one_gpu_colocate as one_gpu_colocate
from trlstack.plan.rules import COLOCATE_FIX as COLOCATE_FIX
from trlstack.plan.rules import FLAGS, Layout, check_layout, check_no_server, check_ports
from trlstack.plan.rules import SHARE_FIX as SHARE_FIX
from trlstack.plan.rules import SHARED_MEMORY_FRACTION as SHARED_MEMORY_FRACTION
from trlstack.plan.rules import SPLIT_MEMORY_FRACTION as SPLIT_MEMORY_FRACTION
from trlstack.plan.rules import vllm_fraction as vllm_fraction
from trlstack.transfer import AUTO, NCCL, check, check_without_server, resolve

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
# The variable each plan key reaches the roles as (compose maps one to the other): one setting, whose one name
# in .env is the plan's key. The variable written in .env would be left out, or win, unseen; it is refused.
ROLE_VARIABLES = {
    Env.PLAN_SERVE_GPUS: Env.SERVE_GPUS,
    Env.PLAN_TENSOR_PARALLEL_SIZE: Env.TENSOR_PARALLEL_SIZE,
    Env.PLAN_DATA_PARALLEL_SIZE: Env.DATA_PARALLEL_SIZE,
    Env.PLAN_NUM_PROCESSES: Env.NUM_PROCESSES,
    Env.PLAN_VLLM_PORT: Env.VLLM_PORT,
    Env.PLAN_VLLM_GROUP_PORT: Env.VLLM_GROUP_PORT,
    Env.PLAN_SHARE_GPUS: Env.SHARE_GPUS,
    Env.PLAN_GPU_MEMORY_UTILIZATION: Env.GPU_MEMORY_UTILIZATION,
    Env.PLAN_WEIGHT_TRANSFER: Env.WEIGHT_TRANSFER,
}


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
    """The server's and the trainer's GPUs as asked (both sets given are checked apart, by check_layout)."""
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
        return serve, _pick("--train-gpus", train_gpus, by_index, machine)
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
    """The GPUs the server and the trainer share: every GPU, or the set given (once, or twice alike: sets
    that differ are refused by check_layout)."""
    if serve_count is not None:
        raise UsageError(
            "--serve N splits the GPUs, and --share-gpus runs both roles on the same GPUs; give one of "
            "the two."
        )
    by_index = {gpu.index: gpu for gpu in gpus}
    machine = describe_machine(gpus)
    serve = None if serve_gpus is None else _pick("--serve-gpus", serve_gpus, by_index, machine)
    train = None if train_gpus is None else _pick("--train-gpus", train_gpus, by_index, machine)
    return serve or train or tuple(gpus), train or serve or tuple(gpus)


def _check_request(gpus: Sequence[Gpu], tensor_parallel_size: int | None, num_heads: int | None) -> None:
    """What a plan request must hold whatever the split: a GPU, sizes of at least 1 (its ports are the
    layout's rules')."""
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
    where: str | None = None,
) -> Plan:
    """Split `gpus` between the vLLM server and the trainer; a bad request raises UsageError naming the fix.

    With no split given, the server takes the first half (rounded down, at least one) and training the rest;
    on a machine of one GPU, where no split exists, the plan takes the layout measured faster for a model of
    `parameters` (one_gpu_colocate): colocate, no server and vLLM inside the trainer, or a server sharing the
    GPU. With `share_gpus` both run on the same GPUs: all of them, or the set given, which must then be one
    set for both. vLLM runs data-parallel replicas of `tensor_parallel_size` GPUs each (default 1: one replica
    per GPU) over exactly its GPUs, on `gpu_memory_utilization` of each GPU's memory (vllm_fraction): the
    layout's rules are plan/rules.py's, which every other entry checks too. The weights go through
    `weight_transfer` (transfer.resolve: auto is CUDA IPC where the GPUs are shared, else NCCL). `where`:
    the serving GPUs in the words of the entry that asked (default: --serve-gpus as plan takes it).
    """
    _check_request(gpus, tensor_parallel_size, num_heads)
    asked = serve_count is not None or serve_gpus is not None or train_gpus is not None
    colocate, why = one_gpu_colocate(len(gpus), share_gpus or asked, parameters)
    # One GPU, nothing asked, and a server measured faster: a server sharing the GPU.
    share_gpus = not colocate and (share_gpus or bool(why))
    serve: tuple[Gpu, ...] = ()  # colocate: the trainer on every GPU, vLLM inside it
    train = tuple(gpus)
    if not colocate:
        serve, train = (_shared if share_gpus else _split)(gpus, serve_gpus, train_gpus, serve_count)
    if colocate:  # no server: none of its settings; vLLM keeps TRL's colocate share of the GPU
        check_ports({"--port": port, "--group-port": group_port})
        check_no_server(tensor_parallel_size, gpu_memory_utilization, FLAGS, "the one-GPU plan")
        tp, fraction = 1, SHARED_MEMORY_FRACTION
    else:
        layout = Layout(
            serve=tuple(gpu.index for gpu in serve),
            train=tuple(gpu.index for gpu in train),
            tensor_parallel_size=tensor_parallel_size,
            share_gpus=share_gpus,
            gpu_memory_utilization=gpu_memory_utilization,
            port=port,
            group_port=group_port,
            num_heads=num_heads,
        )
        sizes = check_layout(layout, FLAGS, where)
        tp, fraction = sizes.tensor_parallel_size, sizes.gpu_memory_utilization
    if colocate:  # and no server to push the weights to
        check_without_server(weight_transfer, "the one-GPU plan for this model")
    transfer = resolve(weight_transfer, share_gpus)
    check(transfer, share_gpus)
    return Plan(serve, train, tp, port, group_port, share_gpus, fraction, colocate, transfer, why)


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
