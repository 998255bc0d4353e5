"""One declaration per setting: a field of a settings dataclass names its environment variable and its help,
and the parser, the environment lookup, `--help` (with the variable and the default) and the settings object
are all made from it, in the style of TRL's dataclass arguments:

    @dataclass(frozen=True)
    class ServeSettings:
        port: int = setting(Env.VLLM_PORT, "vLLM HTTP port", 8000, port_number)

The flag is the field's name with dashes (`--port`). Precedence is flag > environment > default, the same for
every command, so compose files and users can set any setting either way. An empty variable counts as unset,
as compose passes one. A setting that only its command reads (`trlstack slurm --nodes`) is a `flag`: no
variable, its help shown as written, required when it has no default.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from trlstack.defaults import FALSE_VALUES, TRUE_VALUES, Env
from trlstack.errors import Parser, UsageError

_SETTING = "trlstack.setting"  # the field metadata key

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Group = argparse.ArgumentParser | argparse._ArgumentGroup
S = TypeVar("S", bound="DataclassInstance")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Setting:
    env: Env | None  # None: a flag only, read from no variable
    help: str
    type: Callable[[str], Any] = str
    # "option" (--flag VALUE), "switch" (--flag), "positional" (NAME) or "repeated" (--flag VALUE, once for
    # each value: a tuple)
    kind: str = "option"
    metavar: str | None = None
    choices: tuple[str, ...] | None = None


def setting(
    env: Env, help: str, default: Any = None, type: Callable[[str], Any] = str, *, positional: bool = False
) -> Any:
    """A settings field read from `--field-name VALUE` (or a positional NAME), else `env`, else `default`."""
    kind = "positional" if positional else "option"
    return dataclasses.field(default=default, metadata={_SETTING: Setting(env, help, type, kind)})


def flag(
    help: str,
    default: Any = dataclasses.MISSING,
    type: Callable[[str], Any] = str,
    *,
    metavar: str | None = None,
    choices: Sequence[str] | None = None,
    positional: bool = False,
    repeated: bool = False,
) -> Any:
    """A settings field read from its flag only (or a positional NAME), required when it has no `default`;
    `help` is shown as written, the default included where it says one. `repeated`: given once per value,
    a tuple (default empty)."""
    kind = "positional" if positional else "repeated" if repeated else "option"
    spec = Setting(None, help, type, kind, metavar, tuple(choices) if choices is not None else None)
    return dataclasses.field(default=() if repeated else default, metadata={_SETTING: spec})


def declared(spec: Setting, default: Any = None) -> Any:
    """A settings field declared by `spec`, a Setting another command declares too (TENSOR_PARALLEL)."""
    return dataclasses.field(default=default, metadata={_SETTING: spec})


def switch(env: Env, help: str) -> Any:
    """An on/off settings field: on when `--field-name` is given or `env` holds a yes (1, true, yes, on)."""
    return dataclasses.field(default=False, metadata={_SETTING: Setting(env, help, parse_bool, "switch")})


def repeated(env: Env, help: str, type: Callable[[str], Any] = str, default: tuple[Any, ...] = ()) -> Any:
    """A settings field that may be given many times (`--field-name VALUE` each), else `env` as a
    comma-separated list, else `default`: a tuple of the values, in order. Flags replace the variable's list
    (and the default), as a flag given once replaces a value."""
    return dataclasses.field(default=default, metadata={_SETTING: Setting(env, help, type, "repeated")})


class _Repeat(argparse.Action):
    """argparse's `append`, except that the first flag replaces the default (the variable's list) instead of
    adding to it, so that a flag beats the environment here too."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        given = getattr(namespace, self.dest)
        setattr(namespace, self.dest, (*(() if given is self.default else given), values))


def parse_bool(raw: str) -> bool:
    """Read a yes/no value the way compose files and shells write it."""
    value = raw.strip().lower()
    if value in TRUE_VALUES:
        return True
    if value in FALSE_VALUES:
        return False
    raise ValueError("expected one of 1/0, true/false, yes/no, on/off")


def _from_environment(spec: Setting, flag: str, default: Any, environ: Mapping[str, str]) -> Any:
    raw = environ.get(spec.env, "") if spec.env is not None else ""
    if raw == "":
        return default
    try:
        if spec.kind == "repeated":
            return tuple(spec.type(item.strip()) for item in raw.split(","))
        return spec.type(raw)
    except (ValueError, argparse.ArgumentTypeError) as error:
        raise UsageError(
            f"{spec.env}={raw!r} is not valid for {flag}: {error}. Fix or unset {spec.env}."
        ) from None


def add_setting(
    parser: Group, name: str, spec: Setting, default: Any, environ: Mapping[str, str], flag: str | None = None
) -> None:
    """Add one setting to `parser` (dest `name`, given as `flag`), its default read from the environment;
    dataclasses.MISSING as `default` makes it required."""
    flag = flag or "--" + name.replace("_", "-")
    if spec.env is None:
        _add_flag(parser, name, spec, default, flag)
        return
    default = _from_environment(spec, name.upper() if spec.kind == "positional" else flag, default, environ)
    if spec.kind == "positional":
        parser.add_argument(
            name, nargs="?", default=default, metavar=name.upper(), help=f"{spec.help} [env {spec.env}]"
        )
    elif spec.kind == "switch":
        parser.add_argument(
            flag,
            action="store_true",
            default=default,
            help=f"{spec.help} [env {spec.env}; default: {default}]",
        )
    elif spec.kind == "repeated":
        shown = ",".join(map(str, default)) or "none"
        parser.add_argument(
            flag,
            dest=name,
            action=_Repeat,
            default=tuple(default),
            type=spec.type,
            help=f"{spec.help} [env {spec.env}, comma-separated; default: {shown}]",
        )
    else:
        shown = "unset" if default is None else default
        parser.add_argument(
            flag,
            dest=name,
            default=default,
            type=spec.type,
            help=f"{spec.help} [env {spec.env}; default: {shown}]",
        )


def _add_flag(parser: Group, name: str, spec: Setting, default: Any, flag: str) -> None:
    """A setting read from its flag only, its help as written."""
    options: dict[str, Any] = {"type": spec.type, "choices": spec.choices, "help": spec.help}
    if spec.kind == "positional":
        parser.add_argument(name, metavar=spec.metavar or name.upper(), **options)
        return
    required = default is dataclasses.MISSING
    options.update(dest=name, metavar=spec.metavar, required=required)
    if spec.kind == "repeated":  # argparse appends to a list; settings_from makes it a tuple
        parser.add_argument(flag, action="append", **options)
    else:
        parser.add_argument(flag, default=None if required else default, **options)


def add_settings(
    parser: Group,
    settings: type[DataclassInstance],
    environ: Mapping[str, str],
    only: Sequence[str] | None = None,
) -> None:
    """Add every setting the dataclass `settings` declares (or those named in `only`), in the order declared:
    a command that hands settings on to a role takes them as the role declares them."""
    for field in dataclasses.fields(settings):
        spec = field.metadata.get(_SETTING)
        if spec is not None and (only is None or field.name in only):
            add_setting(parser, field.name, spec, field.default, environ)


def variables(settings: type[DataclassInstance]) -> list[Env]:
    """The environment variables the dataclass `settings` reads, in the order declared."""
    specs = (field.metadata.get(_SETTING) for field in dataclasses.fields(settings))
    return [spec.env for spec in specs if spec is not None and spec.env is not None]


def settings_from(
    settings: type[S], args: argparse.Namespace, only: Sequence[str] | None = None, **more: Any
) -> S:
    """The `settings` object for parsed `args` (the fields add_settings added, or those named in `only`, the
    others left at their defaults), plus the fields in `more`."""
    values = {}
    for field in dataclasses.fields(settings):
        spec = field.metadata.get(_SETTING)
        if spec is not None and (only is None or field.name in only):
            value = getattr(args, field.name)
            values[field.name] = tuple(value or ()) if spec.kind == "repeated" else value
    return settings(**values, **more)


@dataclasses.dataclass(frozen=True)
class Role:
    """A role's command line: its name and description, what --print-command prints, and what
    CUDA_VISIBLE_DEVICES chooses for it."""

    prog: str
    description: str
    prints: str
    chooses: str


def parse_role(
    role: Role, settings: type[S], argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[S, argparse.Namespace]:
    """The role's `settings` from its arguments and environment, and the parsed arguments (the preview flags).

    Arguments before `--` are the role's own; the rest become the settings' `extra`, passed on unchanged.
    """
    parser = Parser(prog=role.prog, description=role.description)
    add_settings(parser, settings, environ)
    add_preview(parser, role.prints)
    own, extra = split_extra(argv)
    args = parser.parse_args(own)
    check_preview(args, role.chooses)
    return settings_from(settings, args, extra=extra), args


# argparse types --------------------------------------------------------------------------------------------


def _number(kind: Callable[[str], T], raw: str, what: str) -> T:
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


def rank_number(raw: str) -> int:
    """argparse type: a rank, a whole number from 0."""
    value = _number(int, raw, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a rank (0 or more)")
    return value


def port_number(raw: str) -> int:
    """argparse type: a TCP port."""
    value = _number(int, raw, "a TCP port (1-65535)")
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (1-65535)")
    return value


def positive_float(raw: str) -> float:
    """argparse type: a finite number > 0."""
    value = _number(float, raw, "a number")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a finite number")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


WEEK_S = 7 * 24 * 3600


def wait_seconds(raw: str) -> float:
    """argparse type: how long to wait, in seconds: more than 0, at most a week."""
    value = positive_float(raw)
    if value > WEEK_S:
        raise argparse.ArgumentTypeError(
            f"{value:g} s is longer than any wait; give at most {WEEK_S} s (a week)"
        )
    return value


def fraction(raw: str) -> float:
    """argparse type: a number in (0, 1]."""
    value = positive_float(raw)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{value} is not a fraction in (0, 1]")
    return value


def one_of(*choices: str) -> Callable[[str], str]:
    """argparse type: one of `choices`, exactly as written."""

    def choice(raw: str) -> str:
        if raw not in choices:
            raise argparse.ArgumentTypeError(f"{raw!r} is not one of {', '.join(choices)}")
        return raw

    return choice


# What a role passes on unchanged ---------------------------------------------------------------------------


def split_extra(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """A role's own arguments (before `--`) and the ones it passes through unchanged (after it)."""
    argv = list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


# The preview every role offers -----------------------------------------------------------------------------


def add_preview(parser: argparse.ArgumentParser, prints: str) -> None:
    """`--print-command` (print `prints`, run nothing) and `--gpus N` (preview for a machine with N GPUs)."""
    from trlstack.gpus import gpu_count

    parser.add_argument(
        "--gpus",
        type=gpu_count,
        metavar="N",
        help="with --print-command: show the command for N visible GPUs instead of detecting them",
    )
    parser.add_argument("--print-command", action="store_true", help=f"print {prints}; run nothing")


def check_preview(args: argparse.Namespace, chooses: str) -> None:
    """Refuse --gpus outside a preview: the role's GPUs are CUDA_VISIBLE_DEVICES, not a count."""
    if args.gpus is not None and not args.print_command:
        raise UsageError(
            "--gpus N only describes another machine together with --print-command; to choose "
            f"{chooses}, set {Env.CUDA_VISIBLE_DEVICES}."
        )
