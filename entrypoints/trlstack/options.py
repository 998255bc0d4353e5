"""One declaration per setting: a field of a settings dataclass names its environment variable and its help,
and the parser, the environment lookup, `--help` (with the variable and the default) and the settings object
are all made from it, in the style of TRL's dataclass arguments:

    @dataclass(frozen=True)
    class ServeSettings:
        port: int = setting(Env.VLLM_PORT, "vLLM HTTP port", 8000, port_number)

The flag is the field's name with dashes (`--port`). Precedence is flag > environment > default, the same for
every command, so compose files and users can set any setting either way. An empty variable counts as unset,
as compose passes one. A setting that only its command reads (`trlstack slurm --nodes`) is a `flag`: no
variable, its help shown as written, required when it has no default; a `switch` without a variable is
one too (`--dry-run`). A flag may have other names as well (`aliases=("-o",)` beside `--output`). The types
of the values are in option_types.py; a role's command line (its preview flags, what it passes on) in
roles/command_line.py.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.option_types import parse_bool

_SETTING = "trlstack.setting"  # the field metadata key

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Group = argparse.ArgumentParser | argparse._ArgumentGroup
S = TypeVar("S", bound="DataclassInstance")


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
    aliases: tuple[str, ...] = ()  # the flag's other names, shown first: ("-o",) for --output


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
    aliases: Sequence[str] = (),
) -> Any:
    """A settings field read from its flag only (or a positional NAME), required when it has no `default`;
    `help` is shown as written, the default included where it says one. `repeated`: given once per value,
    a tuple (default empty). `aliases`: the flag's other names (`-o` beside `--output`)."""
    kind = "positional" if positional else "repeated" if repeated else "option"
    spec = Setting(
        None, help, type, kind, metavar, tuple(choices) if choices is not None else None, tuple(aliases)
    )
    return dataclasses.field(default=() if repeated else default, metadata={_SETTING: spec})


def declared(spec: Setting, default: Any = None) -> Any:
    """A settings field declared by `spec`, a Setting another command declares too (TENSOR_PARALLEL)."""
    return dataclasses.field(default=default, metadata={_SETTING: spec})


def switch(env: Env | None, help: str) -> Any:
    """An on/off settings field: on when `--field-name` is given or `env` holds a yes (1, true, yes, on).
    Without `env`, a flag only (`--dry-run`), its help as written."""
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
            *spec.aliases,
            flag,
            action="store_true",
            default=default,
            help=f"{spec.help} [env {spec.env}; default: {default}]",
        )
    elif spec.kind == "repeated":
        shown = ",".join(map(str, default)) or "none"
        parser.add_argument(
            *spec.aliases,
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
            *spec.aliases,
            flag,
            dest=name,
            default=default,
            type=spec.type,
            help=f"{spec.help} [env {spec.env}; default: {shown}]",
        )


def _add_flag(parser: Group, name: str, spec: Setting, default: Any, flag: str) -> None:
    """A setting read from its flag only, its help as written."""
    if spec.kind == "switch":
        parser.add_argument(*spec.aliases, flag, dest=name, action="store_true", help=spec.help)
        return
    options: dict[str, Any] = {"type": spec.type, "choices": spec.choices, "help": spec.help}
    if spec.kind == "positional":
        parser.add_argument(name, metavar=spec.metavar or name.upper(), **options)
        return
    required = default is dataclasses.MISSING
    options.update(dest=name, metavar=spec.metavar, required=required)
    names = (*spec.aliases, flag)
    if spec.kind == "repeated":  # argparse appends to a list; settings_from makes it a tuple
        parser.add_argument(*names, action="append", **options)
    else:
        parser.add_argument(*names, default=None if required else default, **options)


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
