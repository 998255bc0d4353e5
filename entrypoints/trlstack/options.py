"""One declaration per setting: the flag, its environment variable and its help text together.

Precedence is flag > environment > default, the same for every role, so compose files and users can set
any setting either way.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from trlstack.errors import UsageError


def add_setting(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    env: str,
    help: str,
    default: Any = None,
    type: Callable[[str], Any] = str,
    environ: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> None:
    """Add `flag` whose default comes from `env` when that variable is set."""
    environ = os.environ if environ is None else environ
    if env in environ and environ[env] != "":
        raw = environ[env]
        try:
            default = type(raw)
        except (ValueError, argparse.ArgumentTypeError) as error:
            raise UsageError(f"{env}={raw!r} is not valid for {flag}: {error}. Fix or unset {env}.") from None
    shown = "unset" if default is None else default
    parser.add_argument(
        flag, default=default, type=type, help=f"{help} [env {env}; default: {shown}]", **kwargs
    )


def parse_bool(raw: str) -> bool:
    """Read a yes/no value the way compose files and shells write it."""
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError("expected one of 1/0, true/false, yes/no, on/off")


def add_switch(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    env: str,
    help: str,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Add an on/off `flag` that is on when given, or when `env` holds a true value (1, true, yes, on)."""
    environ = os.environ if environ is None else environ
    default = False
    if env in environ and environ[env] != "":
        try:
            default = parse_bool(environ[env])
        except ValueError as error:
            raise UsageError(
                f"{env}={environ[env]!r} is not valid for {flag}: {error}. Fix or unset {env}."
            ) from None
    parser.add_argument(
        flag, action="store_true", default=default, help=f"{help} [env {env}; default: {default}]"
    )


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are UsageErrors, so every bad input exits 1 through run_main."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _number(kind: Callable[[str], Any], raw: str, what: str) -> Any:
    try:
        return kind(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not {what}") from None


def positive_int(raw: str) -> int:
    """argparse type: an integer >= 1."""
    value = _number(int, raw, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive whole number")
    return value


def port_number(raw: str) -> int:
    """argparse type: a TCP port."""
    value = _number(int, raw, "a TCP port (1-65535)")
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (1-65535)")
    return value


def positive_float(raw: str) -> float:
    """argparse type: a number > 0."""
    value = _number(float, raw, "a number")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def split_extra(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """A role's own arguments (before `--`) and the ones it passes through unchanged (after it)."""
    argv = list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


def add_preview(parser: argparse.ArgumentParser, prints: str) -> None:
    """`--print-command` (print `prints`, run nothing) and `--gpus N` (preview for a machine with N GPUs)."""
    parser.add_argument(
        "--gpus",
        type=positive_int,
        metavar="N",
        help="with --print-command: show the command for N visible GPUs instead of detecting them",
    )
    parser.add_argument("--print-command", action="store_true", help=f"print {prints}; run nothing")


def check_preview(args: argparse.Namespace, chooses: str) -> None:
    """Refuse --gpus outside a preview: the role's GPUs are CUDA_VISIBLE_DEVICES, not a count."""
    if args.gpus is not None and not args.print_command:
        raise UsageError(
            "--gpus N only describes another machine together with --print-command; to choose "
            f"{chooses}, set CUDA_VISIBLE_DEVICES."
        )
