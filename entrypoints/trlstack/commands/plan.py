"""`trlstack plan`: split the GPUs between the vLLM server and the trainer and write the plan (a table, the
`.env` keys compose reads, or JSON), or check the plan compose passes from .env. The plan itself, its
renderers and its check are the core's (trlstack/plan/); this module finds the GPUs and writes the result."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.files import write_atomically
from trlstack.gpus import Gpu, gpu_count, parse_gpu_spec
from trlstack.option_types import positive_float, positive_int
from trlstack.options import add_settings, declared, flag, settings_from, switch
from trlstack.plan import ENV_KEYS, MEMORY_FRACTION, TENSOR_PARALLEL, Plan, make_plan
from trlstack.plan.env_check import SERVICES, check_env
from trlstack.plan.memory import count_parameters
from trlstack.plan.render import FORMATS, merge_env, render
from trlstack.ports import Ports
from trlstack.transfer import weight_transfer_setting

if TYPE_CHECKING:
    from trlstack.run.sharding import Memory


@dataclass(frozen=True)
class PlanRequest:
    """What `trlstack plan` is asked: for how many GPUs, split how, for which server, written how and where;
    or to check the plan in the environment instead (--check)."""

    gpus: int | None = flag("plan for N GPUs", None, gpu_count, metavar="N", shown="this machine's, detected")
    serve_gpus: str | None = flag("GPUs for vLLM, e.g. 0-3", None, metavar="SPEC", shown="the rest")
    train_gpus: str | None = flag("GPUs for training, e.g. 4-7", None, metavar="SPEC", shown="the rest")
    serve: int | None = flag("the first N GPUs serve, the rest train", None, positive_int, metavar="N")
    share_gpus: bool = switch(
        None,
        "run the server and the trainer on the same GPUs (all, or the set given): a server that stays "
        "up while the trainer restarts, server mode on one GPU; the weights go through CUDA IPC (on one GPU "
        "the default is the layout measured faster for --model's size: colocate, no server, or this)",
    )
    weight_transfer: str = weight_transfer_setting()
    tensor_parallel_size: int = declared(TENSOR_PARALLEL, 1)
    gpu_memory_utilization: float | None = declared(MEMORY_FRACTION)
    num_heads: int | None = flag(
        "the model's attention heads, to check the tensor-parallel size", None, positive_int, metavar="N"
    )
    model: str | None = flag(
        "estimate for this model: a folder with config.json, the file itself, or a cached Hub id",
        None,
        metavar="PATH_OR_CONFIG",
    )
    gpu_memory: float | None = flag(
        "each GPU's memory in GiB, for --gpus N",
        None,
        positive_float,
        metavar="GIB",
        shown="this machine's, as NVML reports it",
    )
    format: str = flag("output format", "table", choices=FORMATS)
    output: str | None = flag(
        "write to FILE (atomically) instead of standard output", None, metavar="FILE", aliases=("-o",)
    )
    check: bool = switch(
        None,
        f"check the plan in the environment instead of making one: the keys {', '.join(ENV_KEYS)} and "
        f"{Env.VARIANT} as "
        "compose passes them: the environment over ./.env (compose's plan-check service runs this before "
        "either role starts)",
    )
    service: str | None = flag(
        "with --check: check for this compose service (vllm and async-grpo need a server, which the "
        "colocate layout does not run)",
        None,
        choices=SERVICES,
    )


SPLIT = ("serve_gpus", "train_gpus", "serve", "share_gpus", "weight_transfer")
SERVER = ("tensor_parallel_size", "gpu_memory_utilization", "num_heads")
MEMORY = ("model", "gpu_memory")
RESULT = ("format", "output", "check", "service")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Split the GPUs between the vLLM server and the trainer. Without a split, the server takes the first "
        "half (rounded down, at least one) and training the rest; on one GPU the trainer runs vLLM inside "
        "it (colocate, measured faster; --share-gpus plans a server beside it). `--format env -o .env` "
        "writes the keys compose reads, keeping every other line of an existing file."
    )
    add_settings(parser, PlanRequest, os.environ, only=("gpus",))
    add_settings(
        parser.add_argument_group("split (default: half and half)"), PlanRequest, os.environ, only=SPLIT
    )
    add_settings(parser, PlanRequest, os.environ, only=SERVER)
    add_settings(parser, Ports, os.environ)
    add_settings(
        parser.add_argument_group("memory (the trainer's per-GPU estimate, DDP against FSDP2)"),
        PlanRequest,
        os.environ,
        only=MEMORY,
    )
    add_settings(parser, PlanRequest, os.environ, only=RESULT)


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


def model_config(model: str | None) -> dict[str, Any]:
    """--model's config.json (UsageError naming what to give instead), else the default model's shape."""
    from trlstack.plan.memory import DEFAULT_MODEL_CONFIG
    from trlstack.run.sharding import read_model_config

    return dict(DEFAULT_MODEL_CONFIG) if model is None else read_model_config(model, os.environ)


def weigh(plan: Plan, config: Mapping[str, Any], gpu_memory: float | None) -> Memory:
    """The trainer's memory on the plan's training GPUs for the model of `config` (GRPO's defaults)."""
    from trlstack.plan.memory import estimate
    from trlstack.run.sharding import Memory

    sizes = [gpu.memory_bytes for gpu in plan.train]
    if gpu_memory is not None:
        sizes = [int(gpu_memory * (1 << 30))] * len(plan.train)
    smallest = min(size for size in sizes if size) if sizes and all(sizes) else None
    found, why = estimate(config, "grpo", {})
    return Memory(found, why, smallest, plan.vllm_share_of_training_gpus, plan.num_processes)


def memory_choice(plan: Plan, weighed: Memory) -> str:
    """What --sharding auto would choose; UsageError, with the numbers, for a plan whose trainer cannot fit
    (vLLM's share first, where it shares the training GPUs)."""
    from trlstack.plan.rules import FLAGS, check_trainer_room
    from trlstack.run.sharding import choose

    shared_by = (
        str(FLAGS.memory) if plan.share_gpus else "vLLM inside the trainer (vllm_gpu_memory_utilization)"
    )
    check_trainer_room(weighed.estimate, weighed.gpu_bytes, weighed.vllm_share, weighed.processes, shared_by)
    chosen = choose("auto", weighed)
    return f"sharding auto: {chosen.sharding} ({chosen.why})"


def run(args: argparse.Namespace) -> int:
    request = settings_from(PlanRequest, args)
    if request.service is not None and not request.check:
        raise UsageError("--service names what --check checks the plan for; add --check, or drop it.")
    if request.check:
        print(f"trlstack plan: {check_env(compose_values(os.environ), request.service)}", file=sys.stderr)
        return 0
    plan, config = make_request(request, settings_from(Ports, args))
    weighed = weigh(plan, config, request.gpu_memory)
    if request.model is not None:
        for line in weighed.lines():
            print(f"trlstack plan: {line}", file=sys.stderr)
    choice = memory_choice(plan, weighed)  # a plan whose trainer cannot fit stops here, writing nothing
    if request.model is not None:
        print(f"trlstack plan: {choice}", file=sys.stderr)
    if request.output is None:
        sys.stdout.write(render(plan, request.format))
        return 0
    write(request.output, request.format, plan)
    return 0


def make_request(request: PlanRequest, ports: Ports) -> tuple[Plan, dict[str, Any]]:
    """The plan asked for, and the config.json of the model it is for (--model's, else the default's, whose
    memory every plan must leave the trainer): --model's attention heads check the tensor-parallel size
    unless --num-heads gives them."""
    from trlstack.plan.rules import attention_heads

    serve_gpus = None if request.serve_gpus is None else parse_gpu_spec(request.serve_gpus, "--serve-gpus")
    train_gpus = None if request.train_gpus is None else parse_gpu_spec(request.train_gpus, "--train-gpus")
    config = model_config(request.model)
    heads = request.num_heads
    if heads is None and request.model is not None:
        heads = attention_heads(config)
    plan = make_plan(
        machine_gpus(request.gpus, os.environ),
        serve_gpus=serve_gpus,
        train_gpus=train_gpus,
        serve_count=request.serve,
        tensor_parallel_size=request.tensor_parallel_size,
        num_heads=heads,
        port=ports.port,
        group_port=ports.group_port,
        share_gpus=request.share_gpus,
        gpu_memory_utilization=request.gpu_memory_utilization,
        weight_transfer=request.weight_transfer,
        parameters=None if request.model is None else count_parameters(config)[0],
    )
    return plan, config


def env_file_values(text: str) -> dict[str, str]:
    """A .env's values as compose reads them (export, quotes, comments; a key without a value is empty)."""
    import io

    from dotenv import dotenv_values

    return {key: value or "" for key, value in dotenv_values(stream=io.StringIO(text)).items()}


def compose_values(environ: Mapping[str, str], env_file: str = ".env") -> dict[str, str]:
    """The plan's keys as compose hands them to the roles: the environment over the .env of this folder,
    compose's own order (so `trlstack plan --check` on the host reads the .env compose will; in a role's
    container, where compose's plan-check runs it, there is none)."""
    path = Path(env_file)
    return {**env_file_values(path.read_text() if path.is_file() else ""), **environ}


def check_written(text: str, output: str) -> None:
    """The .env about to be written, checked as compose's plan-check will read it: a line kept from the user's
    file that the check refuses (a misspelled TRLSTACK_VARIANT, a plan key under the role's name) stops the
    write, naming it."""
    values = env_file_values(text)
    try:
        check_env(values)
    except UsageError as error:
        raise UsageError(f"{output} would not pass compose's plan check, nothing written: {error}") from None


def write(output: str, fmt: str, plan: Plan) -> None:
    """The plan written to `output` atomically; as .env, merged into the file there (render.merge_env)."""
    if not output.strip():
        raise UsageError("--output is empty; name a file such as .env, or leave -o out for standard output.")
    if os.path.isdir(output):
        raise UsageError(f"--output {output} is a directory; name a file such as {output}/.env.")
    if fmt == "env" and os.path.exists(output):
        with open(output) as stream:
            text = merge_env(stream.read(), plan)
        check_written(text, output)
    else:
        text = render(plan, fmt)
    try:
        write_atomically(output, text)
    except OSError as error:
        raise UsageError(f"cannot write {output}: {error.strerror}; choose a writable path.") from None
    print(f"trlstack plan: wrote {output}", file=sys.stderr)
