"""The rules a GPU layout keeps, each in one function that every entry calls (`trlstack plan`'s make_plan,
the plan in .env that compose's plan-check reads, serve-vllm, train, `trlstack slurm`, doctor), naming the
settings as the entry calling it spells them (`Names`: flags, .env keys, variables):

- `check_ports`: every port a TCP port, no two roles on one;
- `check_sets`: the server's and the trainer's GPUs disjoint, or one set where shared on purpose;
- `vllm_sizes`: vLLM's tensor- x data-parallel layout uses exactly the GPUs it is given, the tensor-parallel
  size dividing the model's attention heads;
- `memory_fraction`: vLLM's share of each GPU's memory, decided here once (`vllm_fraction`) for the plan and
  both roles, and `check_trainer_room`: where the trainer shares a GPU with vLLM, the rest holds what the
  trainer's memory estimate needs;
- `check_processes`: the training processes fit their GPUs;
- `check_no_server`: a layout without a server (colocate) takes no server setting.

`check_layout` applies them to one layout, as the plan, the .env check and serve-vllm describe it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.gpus import describe_indices
from trlstack.plan.memory import Estimate, gib

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
class Name:
    """A setting as one entry spells it: a flag (`--port 8000`) or a variable (`VLLM_PORT=8000`)."""

    text: str
    assign: str = " "
    variable: str | None = None  # a flag's variable, named beside it: the value may have come from there

    def __str__(self) -> str:
        return self.text

    def of(self, value: object) -> str:
        """The setting with a value, as the user writes it."""
        also = f" ({self.variable})" if self.variable else ""
        return f"{self.text}{self.assign}{value}{also}"


def _flag(text: str, variable: str | None = None) -> Name:
    return Name(text, " ", variable)


def _variable(text: str) -> Name:
    return Name(text, "=")


@dataclass(frozen=True)
class Names:
    """How one entry spells each setting of a layout, and how it makes a whole layout anew (`rewrite`)."""

    serve: Name
    train: Name
    tensor_parallel: Name
    data_parallel: Name
    processes: Name
    ranks_per_gpu: Name
    memory: Name
    port: Name
    group_port: Name
    shared: str  # the setting that shares the GPUs, as it is turned on
    rewrite: str


# `trlstack plan` and `trlstack slurm`: flags.
FLAGS = Names(
    serve=_flag("--serve-gpus"),
    train=_flag("--train-gpus"),
    tensor_parallel=_flag("--tensor-parallel-size", Env.TENSOR_PARALLEL_SIZE),
    data_parallel=_flag("--data-parallel-size", Env.DATA_PARALLEL_SIZE),
    processes=_flag("--num-processes", Env.NUM_PROCESSES),
    ranks_per_gpu=_flag("--ranks-per-gpu"),
    memory=_flag("--gpu-memory-utilization", Env.GPU_MEMORY_UTILIZATION),
    port=_flag("--port"),
    group_port=_flag("--group-port"),
    shared="--share-gpus",
    rewrite="`trlstack plan` alone splits the GPUs itself",
)
# The plan as .env holds it (compose's plan-check): the keys as written.
ENV_FILE = Names(
    serve=_variable(Env.PLAN_SERVE_GPUS),
    train=_variable(Env.PLAN_TRAIN_GPUS),
    tensor_parallel=_variable(Env.PLAN_TENSOR_PARALLEL_SIZE),
    data_parallel=_variable(Env.PLAN_DATA_PARALLEL_SIZE),
    processes=_variable(Env.PLAN_NUM_PROCESSES),
    ranks_per_gpu=_variable(Env.RANKS_PER_GPU),
    memory=_variable(Env.PLAN_GPU_MEMORY_UTILIZATION),
    port=_variable(Env.PLAN_VLLM_PORT),
    group_port=_variable(Env.PLAN_VLLM_GROUP_PORT),
    shared=f"{Env.PLAN_SHARE_GPUS}=1",
    rewrite="`trlstack plan --format env -o .env` writes one",
)
# The roles: their flags, the GPUs they are given being the visible ones.
ROLES = Names(
    serve=_variable(Env.CUDA_VISIBLE_DEVICES),
    train=_variable(Env.CUDA_VISIBLE_DEVICES),
    tensor_parallel=_flag("--tensor-parallel-size", Env.TENSOR_PARALLEL_SIZE),
    data_parallel=_flag("--data-parallel-size", Env.DATA_PARALLEL_SIZE),
    processes=_flag("--num-processes", Env.NUM_PROCESSES),
    ranks_per_gpu=_flag("--ranks-per-gpu"),
    memory=_flag("--gpu-memory-utilization", Env.GPU_MEMORY_UTILIZATION),
    port=_flag("--port"),
    group_port=_flag("--group-port"),
    shared="--share-gpus",
    rewrite="`trlstack plan` prints a layout that fits",
)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _indices(indices: Sequence[int]) -> str:
    return ",".join(map(str, indices))


def check_ports(ports: Mapping[str, int]) -> None:
    """Every port (keyed by its name as the entry spells it) a TCP port, no two roles on one."""
    for name, port in ports.items():
        if not 1 <= port <= 65535:
            raise UsageError(f"{name} {port} is out of range; choose a TCP port from 1 to 65535.")
    taken: dict[int, str] = {}
    for name, port in ports.items():
        if port in taken:
            raise UsageError(
                f"{taken[port]} and {name} are both {port}; the HTTP API, the NCCL weight-transfer group and "
                f"the training machines' rendezvous each need a port of their own: give {name} another."
            )
        taken[port] = name


def check_sets(serve: Sequence[int], train: Sequence[int], shared: bool, names: Names) -> None:
    """The server's and the trainer's GPUs: disjoint, or where `shared`, one set."""
    serving, training = names.serve.of(_indices(serve)), names.train.of(_indices(train))
    if shared and set(serve) != set(train):
        raise UsageError(
            f"{names.shared} runs the server and the trainer on the same GPUs, but {serving} and {training} "
            "differ; give both one set."
        )
    both = [index for index in serve if index in train]
    if both and not shared:
        raise UsageError(
            f"GPU {describe_indices(both)} is in both {serving} and {training}: the server and the trainer "
            f"need disjoint GPUs. Change one of them ({names.rewrite}), {COLOCATE_FIX}, or share them on "
            f"purpose with {names.shared}."
        )


def vllm_sizes(
    gpus: int, tp: int | None, dp: int | None, heads: int | None, names: Names, where: str
) -> tuple[int, int]:
    """vLLM's tensor- and data-parallel sizes over exactly the `gpus` it is given (`where`: those GPUs as the
    entry names them), unset ones filling them (tensor-parallel 1, data-parallel the rest); `heads`: the
    model's attention heads, which the tensor-parallel size must divide (None: unknown)."""
    size = tp or 1
    given = ((names.tensor_parallel, tp), (names.data_parallel, dp))
    asked = " x ".join(name.of(value) for name, value in given if value)
    if size > gpus:
        raise UsageError(
            f"{names.tensor_parallel.of(size)} needs {size} GPUs, but {where} gives vLLM {gpus}; make the "
            f"sizes fit ({names.rewrite})."
        )
    if dp is None and gpus % size:
        raise UsageError(
            f"{names.tensor_parallel.of(size)} does not divide the {gpus} serving GPUs ({where}); choose one "
            f"of {', '.join(map(str, _divisors(gpus)))} (vLLM runs replicas of that many GPUs each)."
        )
    replicas = gpus // size if dp is None else dp
    used = size * replicas
    if used > gpus:
        raise UsageError(
            f"{asked} needs {used} GPUs, but {where} gives vLLM {gpus}; make the sizes fit ({names.rewrite})."
        )
    if used < gpus:
        fill = f"set {names.data_parallel.of(gpus // size)} or leave it unset, which fills them, "
        raise UsageError(
            f"{asked} uses {used} of the {gpus} GPUs {where} gives vLLM, leaving {gpus - used} idle; "
            + (fill if gpus % size == 0 else "")
            + f"or give vLLM {used} GPU{'s' if used > 1 else ''} ({names.rewrite})."
        )
    if heads is not None and heads % size:
        fitting = _divisors(math.gcd(gpus, heads))
        raise UsageError(
            f"{names.tensor_parallel.of(size)} does not divide the model's {heads} attention heads; choose "
            f"one of {', '.join(map(str, fitting))}."
        )
    return size, replicas


def attention_heads(config: Mapping[str, object] | None) -> int | None:
    """The attention heads of the model a config.json describes (a multimodal model's in text_config), or
    None where it names none."""
    if not config:
        return None
    for found in (config, config.get("text_config")):
        if isinstance(found, Mapping):
            heads = found.get("num_attention_heads")
            if isinstance(heads, int) and not isinstance(heads, bool) and heads > 0:
                return heads
    return None


def memory_fraction(shared: bool, asked: float | None, names: Names) -> float:
    """vLLM's share of each GPU's memory (`vllm_fraction`), a fraction above 0 and at most 1."""
    fraction = vllm_fraction(shared, asked)
    if not 0 < fraction <= 1:
        raise UsageError(f"{names.memory.of(fraction)} must be a fraction above 0 and at most 1.")
    return fraction


def check_trainer_room(
    estimate: Estimate | None, gpu_bytes: int | None, share: float, processes: int, share_name: str
) -> None:
    """Where vLLM takes `share` of each training GPU (`share_name`: the setting that set it), the rest must
    hold what one training process needs at the least (FSDP2 over `processes` where more than one, else
    DDP); UsageError with both numbers and the share that would fit. Unknown sizes pass."""
    if not share or estimate is None or gpu_bytes is None:
        return
    sharded = processes > 1
    need = estimate.per_process(sharded, processes)
    left = int(gpu_bytes * (1 - share))
    if need <= left:
        return
    how = f"FSDP2 over {processes} processes" if sharded else "one process"
    most = 1 - need / gpu_bytes
    fix = (
        f"lower {share_name} to {math.floor(most * 100) / 100:g} or less"
        if most >= 0.01
        else "it fits beside no vLLM share: shard it over more GPUs, load the weights in bf16 or train an "
        "adapter (use_peft)"
    )
    raise UsageError(
        f"{share_name} {share:g} gives vLLM {gib(gpu_bytes * share)} of each {gib(gpu_bytes)} GPU and leaves "
        f"the trainer {gib(left)}, but training needs {gib(need)} per process ({how}, the memory estimate: "
        f"{estimate.describe()}); {fix}, or give the server GPUs of its own."
    )


def check_processes(processes: int | None, gpus: int, ranks_per_gpu: int, names: Names, where: str) -> int:
    """The training processes on `gpus` GPUs (`where`: those GPUs as the entry names them): `ranks_per_gpu`
    on each unless told fewer."""
    slots = gpus * ranks_per_gpu
    count = processes or slots
    if count > slots:
        each = "a GPU each" if ranks_per_gpu == 1 else f"a GPU for every {ranks_per_gpu}"
        raise UsageError(
            f"{names.processes.of(count)} needs {each}, but {where} has {gpus}; "
            f"lower it (unset: one process per GPU), give it more GPUs, or put more ranks on each GPU with "
            f"{names.ranks_per_gpu}."
        )
    return count


def check_no_server(tp: int | None, memory: float | None, names: Names, layout: str) -> None:
    """A layout that runs no server (`layout`: why, in words) takes none of a server's settings."""
    if tp not in (None, 1):
        raise UsageError(
            f"{names.tensor_parallel.of(tp)} needs that many GPUs for each replica of a vLLM server, and "
            f"{layout} runs none (vLLM inside the trainer, colocate); drop it, or plan a server beside the "
            "trainer with `trlstack plan --share-gpus`."
        )
    if memory is not None:
        raise UsageError(
            f"{names.memory.of(memory)} sets a vLLM server's share of each GPU, and {layout} runs no server "
            "(vLLM inside the trainer, colocate); add --share-gpus to plan a server beside the trainer, or "
            f"set vllm_gpu_memory_utilization in the TRL config ({Env.CONFIG}) for colocate."
        )


@dataclass(frozen=True)
class Layout:
    """A layout as one entry describes it: the server's GPUs, the trainer's (None: not this entry's), vLLM's
    sizes and memory share as asked (None: the default), the ports it knows, the model's attention heads
    (None: unknown) and the training processes asked for."""

    serve: tuple[int, ...]
    train: tuple[int, ...] | None = None
    tensor_parallel_size: int | None = None
    data_parallel_size: int | None = None
    share_gpus: bool = False
    gpu_memory_utilization: float | None = None
    port: int | None = None
    group_port: int | None = None
    num_heads: int | None = None
    processes: int | None = None
    ranks_per_gpu: int = 1


@dataclass(frozen=True)
class Sizes:
    """What a checked layout comes to: vLLM's sizes and memory share, the training processes (None: no
    trainer in the layout)."""

    tensor_parallel_size: int
    data_parallel_size: int
    gpu_memory_utilization: float
    processes: int | None


def check_layout(layout: Layout, names: Names, where: str | None = None) -> Sizes:
    """Every rule of a layout with a vLLM server, in the order a user fixes them; UsageError naming the
    settings as `names` spell them (`where`: the server's GPUs in words, default its setting)."""
    ports = ((names.port, layout.port), (names.group_port, layout.group_port))
    check_ports({str(name): port for name, port in ports if port is not None})
    fraction = memory_fraction(layout.share_gpus, layout.gpu_memory_utilization, names)
    if layout.train is not None:
        check_sets(layout.serve, layout.train, layout.share_gpus, names)
    serving = where or names.serve.of(_indices(layout.serve))
    tp, dp = vllm_sizes(
        len(layout.serve),
        layout.tensor_parallel_size,
        layout.data_parallel_size,
        layout.num_heads,
        names,
        serving,
    )
    processes = None
    if layout.train is not None:
        training = names.train.of(_indices(layout.train))
        processes = check_processes(
            layout.processes, len(layout.train), layout.ranks_per_gpu, names, training
        )
    return Sizes(tp, dp, fraction, processes)
