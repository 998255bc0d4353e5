"""`trlstack plan`: which GPUs serve generations (vLLM) and which train (accelerate), and the sizes and ports
that follow.

`make_plan` is a pure function of the GPUs and the request; the renderers turn a plan into a table for people,
the `.env` keys compose reads, or JSON. The two GPU sets are disjoint unless the plan shares them, which is
only ever chosen (`--share-gpus`, SHARE_GPUS=1 in .env) or the one-GPU default: then the server and the
trainer run on the same GPUs, vLLM takes a fraction of each GPU's memory, and the weight push goes over
NCCL's sockets instead of P2P/NVLink (each role gets its own NCCL host id). `run` is the command: it finds
the GPUs and writes the rendering.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trlstack.defaults import DEFAULT_GROUP_PORT, DEFAULT_VLLM_PORT, Env
from trlstack.errors import UsageError
from trlstack.files import write_atomically
from trlstack.gpus import Gpu, describe_indices, describe_machine, gpu_count, parse_gpu_spec
from trlstack.options import (
    Setting,
    add_setting,
    add_settings,
    fraction,
    parse_bool,
    positive_int,
    settings_from,
)
from trlstack.ports import Ports

FORMATS = ("table", "env", "json")
COLOCATE_FIX = (
    "to generate and train on the same GPU, run `train --vllm-mode colocate` instead of a vLLM server"
)
SHARE_FIX = "or run the server and the trainer on the same GPUs on purpose with --share-gpus (SHARE_GPUS=1)"
# vLLM's share of each GPU when the trainer runs beside it (TRL's own colocate default, 0.3); a plan of
# disjoint sets gives vLLM serve-vllm's default.
SHARED_MEMORY_FRACTION = 0.3
SPLIT_MEMORY_FRACTION = 0.9

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

    @property
    def data_parallel_size(self) -> int:
        return len(self.serve) // self.tensor_parallel_size

    @property
    def num_processes(self) -> int:
        return len(self.train)

    @property
    def serve_indices(self) -> tuple[int, ...]:
        return tuple(gpu.index for gpu in self.serve)

    @property
    def train_indices(self) -> tuple[int, ...]:
        return tuple(gpu.index for gpu in self.train)

    def env(self) -> dict[str, str]:
        """The `.env` keys; GPU lists comma-separated, as CUDA_VISIBLE_DEVICES and compose take them."""
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

    With no split given, the server takes the first half (rounded down, at least one) and training the rest.
    With `share_gpus` (and on a machine of one GPU, where no split exists) both run on the same GPUs: all of
    them, or the set given, which must then be one set for both. vLLM runs data-parallel replicas of
    `tensor_parallel_size` GPUs each (default 1: one replica per GPU), on `gpu_memory_utilization` of each
    GPU's memory (default: SHARED_MEMORY_FRACTION when shared, else SPLIT_MEMORY_FRACTION).
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
    if len(gpus) == 1 and serve_count is None and serve_gpus is None and train_gpus is None:
        share_gpus = True  # one GPU has no split: the server and the trainer share it (README: one GPU)
    if share_gpus:
        serve, train = _shared(gpus, serve_gpus, train_gpus, serve_count)
    else:
        serve, train = _split(gpus, serve_gpus, train_gpus, serve_count)
    fraction = gpu_memory_utilization
    if fraction is None:
        fraction = SHARED_MEMORY_FRACTION if share_gpus else SPLIT_MEMORY_FRACTION
    if not 0 < fraction <= 1:
        raise UsageError(f"--gpu-memory-utilization {fraction} must be a fraction above 0 and at most 1.")

    tp = 1 if tensor_parallel_size is None else tensor_parallel_size
    if tp < 1:
        raise UsageError(f"--tensor-parallel-size {tp} must be at least 1.")
    if num_heads is not None and num_heads < 1:
        raise UsageError(f"--num-heads {num_heads} must be at least 1 (the model's attention heads).")
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


def _summary(plan: Plan) -> str:
    processes = f"{plan.num_processes} process" + ("es" if plan.num_processes != 1 else "")
    summary = (
        f"vLLM serves on GPUs {','.join(map(str, plan.serve_indices))} "
        f"(tensor-parallel {plan.tensor_parallel_size} x data-parallel {plan.data_parallel_size}), "
        f"training on GPUs {','.join(map(str, plan.train_indices))} ({processes})"
    )
    if plan.share_gpus:
        summary += f", the same GPUs shared ({layout(plan)})"
    return summary


def layout(plan: Plan) -> str:
    """The GPU layout in words: what sharing costs, or that the sets are disjoint."""
    if plan.share_gpus:
        return (
            f"shared GPUs: vLLM takes {plan.gpu_memory_utilization:g} of each GPU's memory, the trainer the "
            "rest; weights are pushed over NCCL sockets, not P2P/NVLink"
        )
    return "disjoint GPU sets: weights are pushed over NCCL (P2P/NVLink where the GPUs have it)"


def render_env(plan: Plan) -> str:
    """The plan as `.env` lines for compose, under a comment header."""
    lines = [f"{ENV_HEADER}: {_summary(plan)}."]
    lines += [f"{key}={value}" for key, value in plan.env().items()]
    return "\n".join(lines) + "\n"


def merge_env(existing: str, plan: Plan) -> str:
    """An existing .env with the plan's keys replaced and every other line the user wrote kept as it was.

    python-dotenv reads the file as compose does: `export KEY=...`, quoted values over several lines and
    comments are entries of their own, kept or replaced whole.
    """
    from dotenv.parser import parse_stream

    kept = "".join(
        entry.original.string
        for entry in parse_stream(io.StringIO(existing))
        if entry.key not in ENV_KEYS and not entry.original.string.lstrip().startswith(ENV_HEADER)
    ).splitlines()
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept) + ("\n\n" if kept else "") + render_env(plan)


def _gpu_details(plan: Plan) -> list[dict[str, object]]:
    roles = [("serve", gpu) for gpu in plan.serve] + [("train", gpu) for gpu in plan.train]
    return [
        {
            "index": gpu.index,
            "role": role,
            "uuid": gpu.uuid,
            "name": gpu.name,
            "compute_capability": gpu.capability,
        }
        for role, gpu in roles
    ]


def render_json(plan: Plan) -> str:
    """The plan as JSON: the sizes, the .env keys, and each GPU's role (with UUID and name when known)."""
    import json

    document = {
        "serve_gpus": list(plan.serve_indices),
        "train_gpus": list(plan.train_indices),
        "tensor_parallel_size": plan.tensor_parallel_size,
        "data_parallel_size": plan.data_parallel_size,
        "num_processes": plan.num_processes,
        "vllm_port": plan.port,
        "vllm_group_port": plan.group_port,
        "share_gpus": plan.share_gpus,
        "gpu_memory_utilization": plan.gpu_memory_utilization,
        "env": plan.env(),
        "gpus": _gpu_details(plan),
    }
    return json.dumps(document, indent=2) + "\n"


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def render_table(plan: Plan) -> str:
    """The plan for people: one line per role, then one per GPU when its name or UUID is known."""
    rows = [
        ("role", "CUDA_VISIBLE_DEVICES", "layout", "port"),
        (
            "serve",
            plan.env()["SERVE_GPUS"],
            f"vLLM tensor-parallel {plan.tensor_parallel_size} x data-parallel {plan.data_parallel_size}, "
            f"{plan.gpu_memory_utilization:g} of each GPU's memory",
            f"{plan.port} (HTTP API)",
        ),
        (
            "train",
            plan.env()["TRAIN_GPUS"],
            f"accelerate, {plan.num_processes} process{'es' if plan.num_processes > 1 else ''}",
            f"{plan.group_port} (NCCL weight transfer)",
        ),
    ]
    lines = [*_columns(rows), "", f"layout: {layout(plan)}"]
    details = _gpu_details(plan)
    if any(gpu["uuid"] or gpu["name"] for gpu in details):
        gpu_rows: list[tuple[str, ...]] = [("GPU", "role", "name", "capability", "UUID")]
        gpu_rows += [
            tuple(
                "-" if gpu[key] is None else str(gpu[key])
                for key in ("index", "role", "name", "compute_capability", "uuid")
            )
            for gpu in details
        ]
        lines += ["", *_columns(gpu_rows)]
    return "\n".join(lines) + "\n"


def render(plan: Plan, fmt: str) -> str:
    """The plan in one of FORMATS."""
    renderers = {"table": render_table, "env": render_env, "json": render_json}
    if fmt not in renderers:
        raise UsageError(f"unknown plan format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    return renderers[fmt](plan)


# A plan as .env holds it ------------------------------------------------------------------------------------

REWRITE = "`trlstack plan --format env -o .env` writes one"
_INDEX_LIST = re.compile(r"^\d+(,\d+)*$")


def _env_gpus(values: Mapping[str, str], key: str) -> tuple[int, ...]:
    """The GPU indices of a .env key (compose passes it unchanged to CUDA_VISIBLE_DEVICES, device_ids)."""
    raw = values.get(key, "")
    if not raw.strip():
        raise UsageError(f"{key} is not set; write .env with `trlstack plan --format env -o .env`.")
    if not _INDEX_LIST.match(raw):
        try:
            indices = parse_gpu_spec(raw, key)
        except UsageError:
            raise UsageError(
                f"{key}={raw!r} in .env is not a list of GPU indices; write the indices nvidia-smi shows, "
                f"separated by commas (e.g. {key}=0,1), or let {REWRITE}."
            ) from None
        written = ",".join(map(str, indices))
        raise UsageError(
            f"{key}={raw!r} in .env: compose hands it unchanged to CUDA_VISIBLE_DEVICES and Docker's "
            f"device_ids, which take GPU indices separated by commas; write {key}={written}."
        )
    return parse_gpu_spec(raw, key)


def _env_count(values: Mapping[str, str], key: str) -> int | None:
    raw = values.get(key, "")
    if not raw:
        return None  # compose passes an empty value; the role then uses its default
    if not raw.isdigit() or int(raw) < 1:
        raise UsageError(f"{key}={raw!r} in .env is not a positive whole number; fix or remove the line.")
    return int(raw)


def _env_port(values: Mapping[str, str], key: str, default: int) -> int:
    raw = values.get(key, "")
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise UsageError(f"{key}={raw!r} in .env is not a TCP port (1-65535); fix or remove the line.")
    return int(raw)


def _env_switch(values: Mapping[str, str], key: str) -> bool:
    raw = values.get(key, "")
    try:
        return bool(raw.strip()) and parse_bool(raw)
    except ValueError:
        raise UsageError(f"{key}={raw!r} in .env is not 1 or 0 (yes/no); fix or remove the line.") from None


def _env_fraction(values: Mapping[str, str], key: str) -> float | None:
    raw = values.get(key, "")
    if not raw:
        return None
    try:
        return fraction(raw)
    except (ValueError, argparse.ArgumentTypeError):
        raise UsageError(
            f"{key}={raw!r} in .env is not a fraction above 0 and at most 1; fix or remove the line."
        ) from None


def check_env(values: Mapping[str, str]) -> str:
    """Check a plan as .env holds it (`values`: ENV_KEYS as compose passes them), as the roles will read it;
    a summary, or UsageError naming the key as the user wrote it."""
    serve_key, train_key, tp_key, dp_key, processes_key, port_key, group_key, share_key, memory_key = ENV_KEYS
    serve, train = _env_gpus(values, serve_key), _env_gpus(values, train_key)
    share = _env_switch(values, share_key)
    shared = [index for index in serve if index in train]
    if share and set(serve) != set(train):
        raise UsageError(
            f"{share_key}=1 runs the server and the trainer on the same GPUs, but {serve_key}="
            f"{values[serve_key]} and {train_key}={values[train_key]} differ; give both one set ({REWRITE})."
        )
    if shared and not share:
        raise UsageError(
            f"GPU {describe_indices(shared)} is in both {serve_key}={values[serve_key]} and "
            f"{train_key}={values[train_key]}: the server and the trainer need disjoint GPUs. Change one of "
            f"them in .env ({REWRITE}), {COLOCATE_FIX}, or share them on purpose with {share_key}=1."
        )
    _env_fraction(values, memory_key)
    tp, dp, processes = (_env_count(values, key) for key in (tp_key, dp_key, processes_key))
    needed = (tp or 1) * (dp or 1)
    if needed > len(serve):
        sizes = " x ".join(f"{key}={value}" for key, value in ((tp_key, tp), (dp_key, dp)) if value)
        raise UsageError(
            f"{sizes} needs {needed} GPUs, but {serve_key}={values[serve_key]} has {len(serve)}; make the "
            f"sizes fit ({REWRITE})."
        )
    if processes is not None and processes > len(train):
        raise UsageError(
            f"{processes_key}={processes} needs a GPU each, but {train_key}={values[train_key]} has "
            f"{len(train)}; lower it or remove the line."
        )
    port = _env_port(values, port_key, DEFAULT_VLLM_PORT)
    if port == _env_port(values, group_key, DEFAULT_GROUP_PORT):
        raise UsageError(f"{port_key} and {group_key} are both {port}; the two need different ports.")
    how = "share their GPUs" if share else "are disjoint"
    return (
        f"{serve_key}={values[serve_key]} and {train_key}={values[train_key]} {how}; vLLM on "
        f"{len(serve)} GPU{'s' if len(serve) > 1 else ''}, training on {len(train)}"
    )


# The command -----------------------------------------------------------------------------------------------

TENSOR_PARALLEL = Setting(
    Env.TENSOR_PARALLEL_SIZE,
    "GPUs per vLLM replica; must divide the serving GPUs and the model's attention heads",
    positive_int,
)


MEMORY_FRACTION = Setting(
    Env.GPU_MEMORY_UTILIZATION,
    f"fraction of each serving GPU's memory vLLM takes (default: {SHARED_MEMORY_FRACTION} with shared GPUs, "
    f"else {SPLIT_MEMORY_FRACTION})",
    fraction,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Split the GPUs between the vLLM server and the trainer. Without a split, the server takes the first "
        "half (rounded down, at least one) and training the rest. `--format env -o .env` writes the keys "
        "compose reads, keeping every other line of an existing file."
    )
    parser.add_argument(
        "--gpus", type=gpu_count, metavar="N", help="plan for N GPUs (default: detect this machine's)"
    )
    split = parser.add_argument_group("split (default: half and half)")
    split.add_argument("--serve-gpus", metavar="SPEC", help="GPUs for vLLM, e.g. 0-3 (default: the rest)")
    split.add_argument("--train-gpus", metavar="SPEC", help="GPUs for training, e.g. 4-7 (default: the rest)")
    split.add_argument(
        "--serve", type=positive_int, metavar="N", help="the first N GPUs serve, the rest train"
    )
    split.add_argument(
        "--share-gpus",
        action="store_true",
        help="run the server and the trainer on the same GPUs (all, or the set given): a server that stays "
        "up while the trainer restarts, server mode on one GPU; the weight push goes over NCCL sockets "
        "instead "
        "of P2P/NVLink (the default on a machine of one GPU)",
    )
    add_setting(parser, "tensor_parallel_size", TENSOR_PARALLEL, 1, os.environ)
    add_setting(parser, "gpu_memory_utilization", MEMORY_FRACTION, None, os.environ)
    parser.add_argument(
        "--num-heads",
        type=positive_int,
        metavar="N",
        help="the model's attention heads, to check the tensor-parallel size",
    )
    add_settings(parser, Ports, os.environ)
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format [default: table]")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (atomically) instead of standard output"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"check the plan in the environment instead of making one: the keys {', '.join(ENV_KEYS)} as "
        "compose passes them from .env (compose's plan-check service runs this before either role starts)",
    )


def machine_gpus(count: int | None, environ: Mapping[str, str]) -> list[Gpu]:
    """`count` GPUs of another machine, or this machine's visible GPUs; UsageError when there are none."""
    from trlstack.gpus import check_device_order, probe, select_visible

    if count is not None:
        return [Gpu(index) for index in range(count)]
    check_device_order(environ)
    found = probe()
    if not found.gpus:
        raise UsageError(
            f"no GPU found on this machine ({found.problem or 'the driver reports none'}); pass --gpus N to "
            "plan for a machine with N GPUs, or run `trlstack doctor`."
        )
    visible = select_visible(found.gpus, environ.get(Env.CUDA_VISIBLE_DEVICES), found.mig)
    if not visible:
        raise UsageError(
            f"{Env.CUDA_VISIBLE_DEVICES}={environ[Env.CUDA_VISIBLE_DEVICES]!r} hides every GPU; unset it, "
            "or pass --gpus N."
        )
    return visible


def run(args: argparse.Namespace) -> int:
    if args.check:
        print(f"trlstack plan: {check_env(os.environ)}", file=sys.stderr)
        return 0
    ports = settings_from(Ports, args)
    serve_gpus = None if args.serve_gpus is None else parse_gpu_spec(args.serve_gpus, "--serve-gpus")
    train_gpus = None if args.train_gpus is None else parse_gpu_spec(args.train_gpus, "--train-gpus")
    plan = make_plan(
        machine_gpus(args.gpus, os.environ),
        serve_gpus=serve_gpus,
        train_gpus=train_gpus,
        serve_count=args.serve,
        tensor_parallel_size=args.tensor_parallel_size,
        num_heads=args.num_heads,
        port=ports.port,
        group_port=ports.group_port,
        share_gpus=args.share_gpus,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )
    if args.output is None:
        sys.stdout.write(render(plan, args.format))
        return 0
    if os.path.isdir(args.output):
        raise UsageError(f"--output {args.output} is a directory; name a file such as {args.output}/.env.")
    if args.format == "env" and os.path.exists(args.output):
        with open(args.output) as stream:
            text = merge_env(stream.read(), plan)
    else:
        text = render(plan, args.format)
    try:
        write_atomically(args.output, text)
    except OSError as error:
        raise UsageError(f"cannot write {args.output}: {error.strerror}; choose a writable path.") from None
    print(f"trlstack plan: wrote {args.output}", file=sys.stderr)
    return 0
