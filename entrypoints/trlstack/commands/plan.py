"""`trlstack plan`: split the GPUs between the vLLM server and the trainer and write the plan (a table, the
`.env` keys compose reads, or JSON), or check the plan compose passes from .env. The plan itself, its
renderers and its check are the core's (trlstack/plan/); this module finds the GPUs and writes the result."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.files import write_atomically
from trlstack.gpus import Gpu, gpu_count, parse_gpu_spec
from trlstack.option_types import positive_int
from trlstack.options import add_setting, add_settings, settings_from
from trlstack.plan import ENV_KEYS, MEMORY_FRACTION, TENSOR_PARALLEL, make_plan
from trlstack.plan.env_check import check_env
from trlstack.plan.render import FORMATS, merge_env, render
from trlstack.ports import Ports


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
    if not args.output.strip():
        raise UsageError("--output is empty; name a file such as .env, or leave -o out for standard output.")
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
