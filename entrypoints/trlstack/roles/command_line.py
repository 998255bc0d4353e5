"""A role's command line: its settings from flags and the environment, the arguments it passes on unchanged
after `--`, and the preview every role offers (`--print-command`, `--gpus N`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from trlstack.defaults import Env
from trlstack.errors import Parser, UsageError
from trlstack.gpus import gpu_count
from trlstack.options import Setting, add_setting, add_settings, group_for, settings_from
from trlstack.run.passthrough import split_extra

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

S = TypeVar("S", bound="DataclassInstance")


@dataclass(frozen=True)
class Role:
    """A role's command line: its name and description, what --print-command prints, and what
    CUDA_VISIBLE_DEVICES chooses for it."""

    prog: str
    description: str
    prints: str
    chooses: str


def role_parser(role: Role, settings: type[DataclassInstance], environ: Mapping[str, str]) -> Parser:
    """The role's parser: its settings (each in its declared --help group) and the preview flags."""
    parser = Parser(prog=role.prog, description=role.description)
    add_settings(parser, settings, environ)
    add_preview(parser, role.prints)
    return parser


def parse_role(
    role: Role, settings: type[S], argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[S, argparse.Namespace]:
    """The role's `settings` from its arguments and environment, and the parsed arguments (the preview flags).

    Arguments before `--` are the role's own; the rest become the settings' `extra`, passed on unchanged.
    """
    own, extra = split_extra(argv)
    check_renamed(own)
    args = role_parser(role, settings, environ).parse_args(own)
    check_preview(args, role.chooses)
    return settings_from(settings, args, extra=extra), args


# A role's flags that had another name, each now the one name every entry takes: the old one is refused
# naming it (never read as an unknown flag, nor silently).
RENAMED = {"--vllm-group-port": ("--group-port", Env.VLLM_GROUP_PORT, "plan, doctor and trlstack slurm")}


def check_renamed(argv: Sequence[str]) -> None:
    """UsageError for a flag by its old name (RENAMED), naming the new one."""
    for word in argv:
        old = word.split("=", 1)[0]
        if old in RENAMED:
            new, variable, others = RENAMED[old]
            raise UsageError(
                f"{old} is now {new} ({variable}), the name {others} take too; write {new}{word[len(old) :]}."
            )


PREVIEW_GPUS = Setting(
    None,
    "with --print-command: show the command for N visible GPUs instead of detecting them",
    gpu_count,
    metavar="N",
    group="preview",
)


def add_preview(parser: argparse.ArgumentParser, prints: str) -> None:
    """`--print-command` (print `prints`, run nothing) and `--gpus N` (preview for a machine with N GPUs):
    flags only, no variable read."""
    print_command = Setting(None, f"print {prints}; run nothing", kind="switch", group="preview")
    for name, spec, default in (("gpus", PREVIEW_GPUS, None), ("print_command", print_command, False)):
        add_setting(group_for(parser, spec.group), name, spec, default, {})


def check_preview(args: argparse.Namespace, chooses: str) -> None:
    """Refuse --gpus outside a preview: the role's GPUs are CUDA_VISIBLE_DEVICES, not a count."""
    if args.gpus is not None and not args.print_command:
        raise UsageError(
            "--gpus N only describes another machine together with --print-command; to choose "
            f"{chooses}, set {Env.CUDA_VISIBLE_DEVICES}."
        )
