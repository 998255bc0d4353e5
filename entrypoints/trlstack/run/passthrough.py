"""What a role passes on after `--`, read the way the program that receives it reads it.

serve-vllm hands those arguments to `vllm serve` (vLLM's FlexibleArgumentParser), train to a TRL script
(TrlParser). Both are argparse parsers: a unique abbreviation of a long option counts as the option,
`--opt=v` as `--opt v`, and the last value given wins. vLLM also reads `_` as `-` in option names,
`--opt.key v` as a JSON field of `--opt`, `-O3` as `--optimization-level 3`, and puts the options of a YAML
`--config FILE` before the others. A guard that compared spellings would let any of these through, so each
word is resolved to the option (argparse's `dest`) the receiving parser would pick, from a table of that
parser's option strings: parsers.json, made from the installed vLLM and TRL by
`python -m trlstack.run.passthrough` (the image test holds it equal to them, and the resolution to their
parsers). The same resolution finds unknown and ambiguous options, which the TRL script would reject only
after the wait for the server.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from trlstack.errors import UsageError
from trlstack.recipes import NOT_FIELDS, PARSER_KEYS, RECIPES

TABLE_FILE = Path(__file__).with_name("parsers.json")
VLLM = "vllm serve"  # the table's key for vLLM's parser; the recipes' names are the TRL scripts' keys


@dataclass(frozen=True)
class Receiver:
    """A parser that receives a role's arguments: its name in messages and its option strings -> dest."""

    name: str
    options: Mapping[str, str]
    vllm: bool  # vLLM's spellings: `_` for `-`, dotted JSON fields, -O, --config FILE
    lists: str  # the command that lists the options


@cache
def _table() -> dict[str, dict[str, str]]:
    import json

    table: dict[str, dict[str, str]] = json.loads(TABLE_FILE.read_text())
    return table


def receiver(key: str) -> Receiver:
    """The parser of `vllm serve` (key VLLM) or of a recipe's TRL script (key: the recipe's name)."""
    if key == VLLM:
        return Receiver("vllm serve", _table()[key], vllm=True, lists="vllm serve --help=all")
    lists = f"python -m {RECIPES[key].module} --help"
    return Receiver(f"the {key} script", _table()[key], vllm=False, lists=lists)


@cache
def accepted_keys(recipe: str) -> frozenset[str]:
    """The config keys the recipe's script accepts (its dataclasses' fields): its parser's option dests."""
    return (frozenset(receiver(recipe).options.values()) - NOT_FIELDS) | PARSER_KEYS


def split_extra(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """A role's own arguments (before `--`) and the ones it passes through unchanged (after it)."""
    argv = list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


# Resolving one word ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    """One option word of the arguments: as written, the option part as the parser sees it, and whether the
    next word is its value (no `=v` and not a switch we know of)."""

    written: str
    option: str
    inline_value: bool


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def option_words(extra: Sequence[str], vllm: bool) -> Iterator[tuple[int, Word]]:
    """The words of `extra` the parser reads as options (position, word); values and numbers are skipped."""
    for at, word in enumerate(extra):
        if not word.startswith("-") or word in ("-", "--") or _is_number(word):
            continue
        name, sep, _ = word.partition("=")
        if vllm and name.startswith("-O") and not name.startswith("--"):
            yield at, Word(word, "--optimization-level", inline_value=name != "-O")
            continue
        if vllm and name.startswith("--"):
            # vLLM: underscores become dashes up to the first dot; `--opt.key[+]` sets a field of --opt.
            name = "--" + name[2:].split(".", 1)[0].replace("_", "-")
        yield at, Word(word, name, inline_value=bool(sep))


def candidates(option: str, options: Mapping[str, str]) -> list[str]:
    """The option strings argparse would take `option` for (abbreviations allowed): one, several
    (ambiguous) or none (unrecognized)."""
    if option in options:
        return [option]
    found = [known for known in options if known.startswith(option)]
    if not option.startswith("--") and len(option) > 2:
        found += [known for known in options if known == option[:2]]  # `-n5`: -n with the value 5
    return sorted(set(found))


def _suggestion(option: str, options: Mapping[str, str]) -> str:
    import difflib

    near = difflib.get_close_matches(option, list(options), n=1, cutoff=0.75)
    return f" (did you mean {near[0]}?)" if near else ""


def check_option(
    written: str, option: str, where: Receiver, taken: Mapping[str, str], role: str, place: str = "after `--`"
) -> None:
    """UsageError when `option` (`written` so at `place`) resolves to a setting `role` makes itself (`taken`:
    dest -> what to do instead), to more than one option, or to none."""
    shown = written.split("=", 1)[0]
    found = candidates(option, where.options)
    for known in found:
        fix = taken.get(where.options[known])
        if fix is not None:
            also = "" if shown == known else f" ({where.name} reads it as {known})"
            raise UsageError(f"{shown} {place} would override {role}'s setting{also}; {fix}.")
    if not found:
        raise UsageError(
            f"{where.name} has no option {shown} ({place}){_suggestion(option, where.options)}; check its "
            f"spelling (`{where.lists}` lists the options)."
        )
    if len(found) > 1:
        listed = ", ".join(found[:6]) + (f" ({len(found)} in all)" if len(found) > 6 else "")
        raise UsageError(
            f"{shown} {place} is ambiguous for {where.name}: it could be {listed}; write the whole option "
            "name."
        )


def passed_values(extra: Sequence[str], where: Receiver) -> dict[str, str | list[str]]:
    """The values `extra` gives the options `where` reads, by dest, as written (the last given wins). An
    option followed by several words takes them all, as a list (--reward_funcs a b: TRL's list fields read
    them so, and it refuses the extra words of any other option). An option given without a value is a
    switch: "true", or "false" for its `--no-` form; one unknown or ambiguous (check_passthrough refuses
    those) is left out."""
    values: dict[str, str | list[str]] = {}
    for at, word in option_words(extra, where.vllm):
        found = candidates(word.option, where.options)
        if len(found) != 1:
            continue
        dest = where.options[found[0]]
        if word.inline_value:
            values[dest] = word.written.split("=", 1)[1]
        elif given := _values_after(extra, at):
            values[dest] = given[0] if len(given) == 1 else given
        else:
            negated = found[0][2:5] in ("no_", "no-") and not dest.startswith("no_")
            values[dest] = "false" if negated else "true"
    return values


def _values_after(extra: Sequence[str], at: int) -> list[str]:
    """The words after the option at `at` up to the next option (a negative number is a value)."""
    words = []
    for word in extra[at + 1 :]:
        if word.startswith("-") and not _is_number(word):
            break
        words.append(word)
    return words


def check_passthrough(
    extra: Sequence[str], where: Receiver, taken: Mapping[str, str], role: str, place: str = "after `--`"
) -> None:
    """Refuse arguments after `--` (or at another `place`) that would override what `role` sets itself
    (`taken`: dest -> what to do instead), and options `where` does not have; vLLM's `--config FILE` is read
    and held to the same rule."""
    words = list(option_words(extra, where.vllm))
    if where.vllm:
        configs = [(at, word) for at, word in words if word.option == "--config"]
        if len(configs) > 1:
            raise UsageError(f"--config is given more than once {place}; vllm serve reads one config file.")
        for at, word in configs:
            _check_vllm_config(extra, at, word, where, taken, role)
    for _, word in words:
        if word.option in ("-h", "--help") or (where.vllm and word.option.startswith("--help")):
            continue
        check_option(word.written, word.option, where, taken, role, place)


@dataclass(frozen=True)
class ScriptArgs:
    """What a recipe's script makes of the arguments after `--`: the config keys it accepts (its fields) and
    the values those arguments give, by key, as written."""

    accepted: frozenset[str]
    passed: dict[str, str | list[str]]


def script_args(extra: Sequence[str], recipe: str, taken: Mapping[str, str], role: str) -> ScriptArgs:
    """The arguments after `--` for a recipe's script, checked (nothing `role` sets itself, per `taken`; no
    unknown or ambiguous option) and read as the script reads them."""
    where = receiver(recipe)
    check_passthrough(extra, where, taken, role)
    return ScriptArgs(accepted_keys(recipe), passed_values(extra, where))


# vLLM's --config FILE --------------------------------------------------------------------------------------


def _check_vllm_config(
    extra: Sequence[str], at: int, word: Word, where: Receiver, taken: Mapping[str, str], role: str
) -> None:
    if word.inline_value:
        raise UsageError(
            f"{word.written}: vllm serve reads a config file only as `--config FILE` (two words); "
            "with `=` it ignores the file. Write --config FILE."
        )
    if at + 1 >= len(extra):
        raise UsageError("--config after `--` needs a file: --config FILE.yaml.")
    path = Path(extra[at + 1])
    for key in vllm_config_keys(path):
        option = "--" + key.split(".", 1)[0].replace("_", "-")
        check_option(f"`{key}`", option, where, taken, role, place=f"in --config {path}")


def vllm_config_keys(path: Path) -> list[str]:
    """The top-level keys of a vLLM YAML config file (each becomes `--KEY`); UsageError for what vLLM would
    fail on with a traceback."""
    import yaml

    if path.suffix not in (".yaml", ".yml"):
        raise UsageError(f"--config {path}: vllm serve reads only .yaml or .yml config files.")
    try:
        config: Any = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"--config {path}: no such file.") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"--config {path}: cannot read it ({error}).") from None
    except yaml.YAMLError as error:
        raise UsageError(f"--config {path} is not valid YAML: {error}.") from None
    if not isinstance(config, dict) or not all(isinstance(key, str) for key in config):
        raise UsageError(f"--config {path} must be a YAML mapping of vLLM options, e.g. `max-num-seqs: 64`.")
    return list(config)


# The table, from the installed parsers (run in the image) ---------------------------------------------------


def vllm_options() -> dict[str, str]:
    """Option string -> dest of the installed `vllm serve` (imports vLLM).

    vLLM asks its platform for defaults while building the parser and finds none without a GPU; its CPU
    platform stands in, which changes defaults, not the options.
    """
    import vllm.platforms
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.platforms.cpu import CpuPlatform
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    if not vllm.platforms.current_platform.device_type:
        vllm.platforms._current_platform = CpuPlatform()
    subparsers = FlexibleArgumentParser(prog="vllm").add_subparsers()
    parser = ServeSubcommand().subparser_init(subparsers)
    return {option: action.dest for option, action in parser._option_string_actions.items()}


def trl_options(recipe: str) -> dict[str, str]:
    """Option string -> dest of a recipe's TRL script parser (imports TRL); TrlParser reads --config."""
    import importlib

    parser = importlib.import_module(RECIPES[recipe].module).make_parser()
    options = {option: action.dest for option, action in parser._option_string_actions.items()}
    return {**options, "--config": "config"}


def table_from_installed() -> dict[str, dict[str, str]]:
    table = {VLLM: vllm_options(), **{name: trl_options(name) for name in RECIPES}}
    return {key: dict(sorted(options.items())) for key, options in table.items()}


def write_table(path: Path = TABLE_FILE) -> None:
    import json

    path.write_text(json.dumps(table_from_installed(), indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    write_table()
    print(f"wrote {TABLE_FILE}")
