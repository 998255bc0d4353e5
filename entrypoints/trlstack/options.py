"""One declaration per setting: a field of a settings dataclass names its environment variable and its help,
and the parser, the environment lookup, `--help` (with the variable and the default) and the settings object
are all made from it, in the style of TRL's dataclass arguments:

    @dataclass(frozen=True)
    class ServeSettings:
        port: int = setting(Env.VLLM_PORT, "vLLM HTTP port", 8000, port_number)

The flag is the field's name with dashes (`--port`). Precedence is flag > environment > default, the same for
every command, so compose files and users can set any setting either way. An empty variable counts as unset,
as compose passes one. A setting that only its command reads (`trlstack slurm --nodes`) is a `flag`: no
variable, required when it has no default; a `switch` without a variable is
one too (`--dry-run`). A flag may have other names as well (`aliases=("-o",)` beside `--output`).

--help states each setting's variable and default once, in one place (`help_text`): `[env X; default: Y]`,
where Y is the value, or `shown` where the value stands for something decided later ("visible GPUs"), so a
help text itself never states a default. A setting with a fixed set of values (argparse choices, or a type
from option_types.one_of that names them) shows them in the usage line (`--sharding {auto,none,fsdp2}`). A
setting may name its --help group (`group="the layout"`); add_settings puts it there when it adds to a
parser, and where a caller passes a group of its own, the caller's wins. The types of the values are in
option_types.py; a role's command line (its preview flags, what it passes on) in roles/command_line.py.
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
    help: str  # what the setting is; never its default, which --help states from `shown` or the value
    type: Callable[[str], Any] = str
    # "option" (--flag VALUE), "switch" (--flag), "positional" (NAME) or "repeated" (--flag VALUE, once for
    # each value: a tuple)
    kind: str = "option"
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()  # the flag's other names, shown first: ("-o",) for --output
    shown: str | None = None  # the default as --help states it, where the value (often None) is decided later
    group: str | None = None  # the --help group it belongs to (None: the parser's own)


def setting(
    env: Env,
    help: str,
    default: Any = None,
    type: Callable[[str], Any] = str,
    *,
    positional: bool = False,
    shown: str | None = None,
    group: str | None = None,
) -> Any:
    """A settings field read from `--field-name VALUE` (or a positional NAME), else `env`, else `default`;
    --help states `shown` as the default where given (a None default that stands for a later decision)."""
    kind = "positional" if positional else "option"
    spec = Setting(env, help, type, kind, shown=shown, group=group)
    return dataclasses.field(default=default, metadata={_SETTING: spec})


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
    shown: str | None = None,
    group: str | None = None,
) -> Any:
    """A settings field read from its flag only (or a positional NAME), required when it has no `default`.
    `repeated`: given once per value, a tuple (default empty). `aliases`: the flag's other names (`-o` beside
    `--output`). --help states the default (`shown`, else a default other than None and empty)."""
    kind = "positional" if positional else "repeated" if repeated else "option"
    spec = Setting(
        None,
        help,
        type,
        kind,
        metavar,
        tuple(choices) if choices is not None else None,
        tuple(aliases),
        shown,
        group,
    )
    return dataclasses.field(default=() if repeated else default, metadata={_SETTING: spec})


def declared(spec: Setting, default: Any = None) -> Any:
    """A settings field declared by `spec`, a Setting another command declares too (TENSOR_PARALLEL)."""
    return dataclasses.field(default=default, metadata={_SETTING: spec})


def switch(env: Env | None, help: str, group: str | None = None) -> Any:
    """An on/off settings field: on when `--field-name` is given or `env` holds a yes (1, true, yes, on).
    Without `env`, a flag only (`--dry-run`)."""
    spec = Setting(env, help, parse_bool, "switch", group=group)
    return dataclasses.field(default=False, metadata={_SETTING: spec})


def repeated(
    env: Env,
    help: str,
    type: Callable[[str], Any] = str,
    default: tuple[Any, ...] = (),
    group: str | None = None,
) -> Any:
    """A settings field that may be given many times (`--field-name VALUE` each), else `env` as a
    comma-separated list, else `default`: a tuple of the values, in order. Flags replace the variable's list
    (and the default), as a flag given once replaces a value."""
    spec = Setting(env, help, type, "repeated", group=group)
    return dataclasses.field(default=default, metadata={_SETTING: spec})


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


def choices_of(spec: Setting) -> tuple[str, ...] | None:
    """The fixed set of values a setting takes: its declared choices, or those its type names (one_of)."""
    return spec.choices or getattr(spec.type, "choices", None)


def help_text(spec: Setting, default: Any) -> str:
    """A setting's --help: its text, then its variable and its default, stated here and only here:
    `[env X; default: Y]`, `[env X]` (a positional without a default), or `[default: Y]` (a flag)."""
    if spec.shown is not None:
        shown: str | None = spec.shown
    elif spec.kind == "repeated":
        shown = ",".join(map(str, default or ())) or ("none" if spec.env else None)
    elif spec.kind == "switch":
        shown = str(default) if spec.env else None
    elif default is None or default is dataclasses.MISSING or default == ():
        shown = "unset" if spec.env and spec.kind != "positional" else None
    else:
        shown = str(default)
    parts = []
    if spec.env is not None:
        parts.append(f"env {spec.env}" + (", comma-separated" if spec.kind == "repeated" else ""))
    if shown is not None:
        parts.append(f"default: {shown}")
    return f"{spec.help} [{'; '.join(parts)}]" if parts else spec.help


def add_setting(
    parser: Group, name: str, spec: Setting, default: Any, environ: Mapping[str, str], flag: str | None = None
) -> None:
    """Add one setting to `parser` (dest `name`, given as `flag`), its default read from the environment;
    dataclasses.MISSING as `default` makes it required."""
    flag = flag or "--" + name.replace("_", "-")
    if spec.env is not None:
        named = name.upper() if spec.kind == "positional" else flag
        default = _from_environment(spec, named, default, environ)
    options: dict[str, Any] = {"help": help_text(spec, default)}
    if spec.kind == "switch":
        on = bool(default)
        parser.add_argument(*spec.aliases, flag, dest=name, action="store_true", default=on, **options)
        return
    # Choices shown in the usage line ({a,b}) and checked by argparse; a type that names them (one_of) has
    # checked the variable's value already, with the same message as the flag's.
    options.update(type=spec.type, choices=choices_of(spec))
    if spec.kind == "positional":
        metavar = spec.metavar or (None if options["choices"] else name.upper())
        required = spec.env is None and default is dataclasses.MISSING
        nargs = None if required else "?"
        value = None if default is dataclasses.MISSING else default
        parser.add_argument(name, metavar=metavar, nargs=nargs, default=value, **options)
        return
    required = default is dataclasses.MISSING
    options.update(dest=name, metavar=spec.metavar, required=required)
    if spec.kind == "repeated" and spec.env is None:  # argparse appends to a list; settings_from: a tuple
        parser.add_argument(*spec.aliases, flag, action="append", **options)
    elif spec.kind == "repeated":
        parser.add_argument(*spec.aliases, flag, action=_Repeat, default=tuple(default), **options)
    else:
        parser.add_argument(*spec.aliases, flag, default=None if required else default, **options)


def group_for(parser: Group, title: str | None) -> Group:
    """The --help group named `title` of `parser` (made on first use), or `parser` itself: for no title, or
    where `parser` is already a group a caller chose."""
    if title is None or not isinstance(parser, argparse.ArgumentParser):
        return parser
    for group in parser._action_groups:
        if group.title == title:
            return group
    return parser.add_argument_group(title)


def add_settings(
    parser: Group,
    settings: type[DataclassInstance],
    environ: Mapping[str, str],
    only: Sequence[str] | None = None,
) -> None:
    """Add every setting the dataclass `settings` declares (or those named in `only`), in the order declared,
    each to its declared --help group: a command that hands settings on to a role takes them as the role
    declares them."""
    for field in dataclasses.fields(settings):
        spec = field.metadata.get(_SETTING)
        if spec is not None and (only is None or field.name in only):
            add_setting(group_for(parser, spec.group), field.name, spec, field.default, environ)


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
