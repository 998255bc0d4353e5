"""`trlstack`: the dispatcher of the commands that live in their own modules.

Every command module provides `add_arguments(parser)` and `run(args) -> int`. Only the command being run is
imported and gets its arguments, so `trlstack --help` stays fast and one command's imports or settings cost
the others nothing. The roles themselves are the `serve-vllm` and `train` console scripts.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from trlstack import __version__
from trlstack.errors import Parser, UsageError, run_main

# name -> (module, one-line help). A module is imported only when its command runs. Register a new command by
# adding a line here.
MODULE_COMMANDS = {
    "plan": ("trlstack.commands.plan", "split the GPUs between the vLLM server and the trainer"),
    "doctor": (
        "trlstack.commands.doctor",
        "check this machine for the stack: driver, GPUs, /dev/shm, ports, HF cache, versions",
    ),
    "version": ("trlstack.commands.version", "print trlstack's version and the pinned stack"),
    "bundle": (
        "trlstack.commands.bundle",
        "pack the locked GPU stack as an offline bundle for another machine",
    ),
    "init": ("trlstack.commands.init", "write a task folder (config, rewards, data) that trains as it is"),
    "check-task": (
        "trlstack.commands.check_task",
        "check a task folder in seconds: config, rewards called on its data, columns, model",
    ),
    "tiny": (
        "trlstack.commands.tiny",
        "make a tiny model and tokenizer on the spot, for smoke tests without the Hub",
    ),
    "verify": (
        "trlstack.commands.verify",
        "check an image against its commit: uv.lock, the SBOM, kernels.lock",
    ),
    "slurm": (
        "trlstack.commands.slurm",
        "write (or submit) an sbatch script that runs a recipe across Slurm nodes",
    ),
    "export": ("trlstack.commands.export", "turn the built image into an Apptainer .sif or an enroot .sqsh"),
    "dashboard": (
        "trlstack.commands.dashboard",
        "serve a run's metrics live in a browser, on 127.0.0.1",
    ),
    "report": (
        "trlstack.commands.report",
        "draw a finished (or running) run's metrics as one picture, and sum them up in the terminal",
    ),
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
        from trlstack.stack import GET_GPU_STACK

        raise UsageError(
            f"`trlstack {name}` needs the Python module {error.name!r}, which is not installed: "
            f"{GET_GPU_STACK}."
        ) from None


def _top_parser() -> Parser:
    parser = Parser(
        prog="trlstack",
        description="trlstack: TRL's training speed-ups as pinned images, compose stacks and a Nix shell. "
        "The roles themselves are the `serve-vllm` and `train` commands.",
    )
    parser.add_argument("--version", action="version", version=f"trlstack {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name, (_, text) in MODULE_COMMANDS.items():
        commands.add_parser(name, help=text)
    return parser


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] not in MODULE_COMMANDS:
        parser = _top_parser()
        parser.parse_args(argv)  # --help, --version, or an error naming the valid commands
        parser.error("choose a command")
    name, rest = argv[0], argv[1:]
    module_name, text = MODULE_COMMANDS[name]
    module = _import_command(name, module_name)
    parser = Parser(prog=f"trlstack {name}", description=text)
    module.add_arguments(parser)
    code: int = module.run(parser.parse_args(rest))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run `trlstack`; returns the exit code (0 ok, 1 user error with the fix named, 130 interrupted)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    return run_main("trlstack", lambda: _dispatch(arguments))
