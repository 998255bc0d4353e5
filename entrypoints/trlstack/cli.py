"""`trlstack`: the GPU plan, a check of this machine, the versions, and tools that live in their own modules.

Every command provides `add_arguments(parser)` and `run(args) -> int`. Only the command being run is imported
and gets its arguments, so `trlstack --help` stays fast and one command's imports or settings cost the others
nothing.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from trlstack import __version__
from trlstack.errors import UsageError, run_main
from trlstack.options import Parser, add_setting, port_number, positive_int

# Commands in their own modules: name -> (module, one-line help). A module provides add_arguments(parser) and
# run(args) -> int, and is imported only when its command runs. Register a new command by adding a line here.
MODULE_COMMANDS = {
    "doctor": (
        "trlstack.doctor",
        "check this machine for the stack: driver, GPUs, /dev/shm, ports, HF cache, versions",
    ),
    "bundle": ("trlstack.bundle", "pack the locked GPU stack as an offline bundle for another machine"),
    "tiny": ("trlstack.tiny", "make a tiny model and tokenizer on the spot, for smoke tests without the Hub"),
    "slurm": ("trlstack.slurm", "write (or submit) an sbatch script that runs a recipe across Slurm nodes"),
    "export": ("trlstack.export", "turn the built image into an Apptainer .sif or an enroot .sqsh"),
}


def add_port_settings(parser: argparse.ArgumentParser) -> None:
    """--port and --group-port, shared by `plan` and `doctor` with the roles' environment variables."""
    from trlstack.plan import DEFAULT_GROUP_PORT, DEFAULT_PORT

    add_setting(
        parser, "--port", "TRLSTACK_VLLM_PORT", "vLLM HTTP port", default=DEFAULT_PORT, type=port_number
    )
    add_setting(
        parser,
        "--group-port",
        "TRLSTACK_VLLM_GROUP_PORT",
        "port of the NCCL group that moves weights from the trainer to vLLM",
        default=DEFAULT_GROUP_PORT,
        type=port_number,
    )


# plan -------------------------------------------------------------------------------------------------------


def plan_arguments(parser: argparse.ArgumentParser) -> None:
    from trlstack.plan import FORMATS

    parser.description = (
        "Split the GPUs between the vLLM server and the trainer. Without a split, the server takes the first "
        "half (rounded down, at least one) and training the rest. `--format env -o .env` writes the keys "
        "compose reads, keeping every other line of an existing file."
    )
    parser.add_argument(
        "--gpus", type=positive_int, metavar="N", help="plan for N GPUs (default: detect this machine's)"
    )
    split = parser.add_argument_group("split (default: half and half)")
    split.add_argument("--serve-gpus", metavar="SPEC", help="GPUs for vLLM, e.g. 0-3 (default: the rest)")
    split.add_argument("--train-gpus", metavar="SPEC", help="GPUs for training, e.g. 4-7 (default: the rest)")
    split.add_argument(
        "--serve", type=positive_int, metavar="N", help="the first N GPUs serve, the rest train"
    )
    add_setting(
        parser,
        "--tensor-parallel-size",
        "TRLSTACK_TENSOR_PARALLEL_SIZE",
        "GPUs per vLLM replica; must divide the serving GPUs and the model's attention heads",
        default=1,
        type=positive_int,
    )
    parser.add_argument(
        "--num-heads",
        type=positive_int,
        metavar="N",
        help="the model's attention heads, to check the tensor-parallel size",
    )
    add_port_settings(parser)
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format [default: table]")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (atomically) instead of standard output"
    )


def _plan_gpus(count: int | None) -> list:
    from trlstack.gpus import Gpu, probe, select_visible

    if count is not None:
        return [Gpu(index) for index in range(count)]
    found = probe()
    if not found.gpus:
        raise UsageError(
            f"no GPU found on this machine ({found.problem or 'the driver reports none'}); pass --gpus N to "
            "plan for a machine with N GPUs, or run `trlstack doctor`."
        )
    visible = select_visible(found.gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if not visible:
        raise UsageError(
            f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r} hides every GPU; unset it, "
            "or pass --gpus N."
        )
    return visible


def write_atomically(path: str, text: str) -> None:
    """Replace `path` with `text` in one step, keeping the old file's mode; a crash leaves the old file."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o644
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def plan_run(args: argparse.Namespace) -> int:
    from trlstack.gpus import parse_gpu_spec
    from trlstack.plan import make_plan, merge_env, render

    serve_gpus = None if args.serve_gpus is None else parse_gpu_spec(args.serve_gpus, "--serve-gpus")
    train_gpus = None if args.train_gpus is None else parse_gpu_spec(args.train_gpus, "--train-gpus")
    plan = make_plan(
        _plan_gpus(args.gpus),
        serve_gpus=serve_gpus,
        train_gpus=train_gpus,
        serve_count=args.serve,
        tensor_parallel_size=args.tensor_parallel_size,
        num_heads=args.num_heads,
        port=args.port,
        group_port=args.group_port,
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


# version ----------------------------------------------------------------------------------------------------


def version_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Print trlstack's version and the pinned GPU stack with what is installed here."


def version_run(args: argparse.Namespace) -> int:
    from trlstack.stack import installed_version, pinned_stack

    print(f"trlstack {__version__}")
    print(f"python {sys.version.split()[0]}")
    pins = pinned_stack()
    if not pins:
        print("pinned stack: unknown (trlstack is not installed as a package)")
        return 0
    width = max(map(len, pins))
    for name, pinned in pins.items():
        installed = installed_version(name) or "not installed"
        print(f"{name.ljust(width)}  {pinned.ljust(8)}  installed: {installed}")
    return 0


BUILTIN_COMMANDS: dict[str, tuple[str, Callable, Callable]] = {
    "plan": ("split the GPUs between the vLLM server and the trainer", plan_arguments, plan_run),
    "version": ("print trlstack's version and the pinned stack", version_arguments, version_run),
}


def _import_command(name: str, module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:
            raise UsageError(
                f"`trlstack {name}` is not part of this installation ({module_name} is missing); "
                "reinstall trlstack from a complete checkout or use the image."
            ) from None
        raise UsageError(
            f"`trlstack {name}` needs the Python module {error.name!r}, which is not installed; use the "
            "image or install the GPU stack (`uv sync --extra gpu`)."
        ) from None


def _top_parser() -> Parser:
    parser = Parser(
        prog="trlstack",
        description="trlstack: TRL's training speed-ups as pinned images, compose stacks and a Nix shell. "
        "The roles themselves are the `serve-vllm` and `train` commands.",
    )
    parser.add_argument("--version", action="version", version=f"trlstack {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name, (text, _, _) in BUILTIN_COMMANDS.items():
        commands.add_parser(name, help=text)
    for name, (_, text) in MODULE_COMMANDS.items():
        commands.add_parser(name, help=text)
    return parser


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] not in BUILTIN_COMMANDS.keys() | MODULE_COMMANDS.keys():
        parser = _top_parser()
        parser.parse_args(argv)  # --help, --version, or an error naming the valid commands
        parser.error("choose a command")
    name, rest = argv[0], argv[1:]
    if name in BUILTIN_COMMANDS:
        text, add_arguments, run = BUILTIN_COMMANDS[name]
    else:
        module_name, text = MODULE_COMMANDS[name]
        module = _import_command(name, module_name)
        add_arguments, run = module.add_arguments, module.run
    parser = Parser(prog=f"trlstack {name}", description=text)
    add_arguments(parser)
    return run(parser.parse_args(rest))


def main(argv: Sequence[str] | None = None) -> int:
    """Run `trlstack`; returns the exit code (0 ok, 1 user error with the fix named, 130 interrupted)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    return run_main("trlstack", lambda: _dispatch(arguments))
